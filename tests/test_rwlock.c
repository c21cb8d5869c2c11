/* The read-write lock: the exclusion matrix, reentrancy on both sides, the
 * read holds' timeout keys, leases and their renewal by the watchdog, lost
 * read holds, and Redisson's own scenarios (RedissonReadWriteLockTest,
 * timings scaled down). Wake-ups, Redisson's side, force release and bad
 * input: test_rwlock_interop.c. */
#include "rwlock_util.h"

/* ----------------------------------------------------------- exclusion */

/* Read + read: both in; read + write and write + read and write + write: the
 * second waits; a writer takes the read lock; a reader asking for the write
 * lock is refused at once (DLOCK_EDEADLK) even with a wait forever, and is
 * left with its read holds only. */
static void test_exclusion_matrix(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-matrix");
    dlock_lock *ra = rd(cli, name, "a:1"), *rb = rd(cli, name, "b:1");
    dlock_lock *wa = wr(cli, name, "a:1"), *wb = wr(cli, name, "b:1");

    assert_int_equal(dlock_lock_try(ra, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(rb, 0, 5000), DLOCK_OK);   /* read + read */
    assert_true(held(ra) && held(rb));
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(wb, 200, 5000), DLOCK_EDEADLK);   /* b reads */
    assert_true(th_now_ms() - t0 < 150 * th_slack());
    assert_non_null(strstr(dlock_last_error(), "holds the read lock"));
    assert_int_equal(dlock_lock_acquire(wb, DLOCK_WATCHDOG), DLOCK_EDEADLK);
    assert_false(held(wb));
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);
    assert_int_equal(dlock_lock_release(rb), DLOCK_OK);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(wb, 200, 5000), DLOCK_ETIMEDOUT);   /* read + write */
    assert_true(th_now_ms() - t0 >= 190);
    assert_non_null(strstr(dlock_last_error(), "read- or write-locked"));
    assert_int_equal(dlock_lock_release(ra), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);

    assert_int_equal(dlock_lock_try(wa, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(rb, 100, 5000), DLOCK_ETIMEDOUT);   /* write + read */
    assert_non_null(strstr(dlock_last_error(), "write-locked by another owner"));
    assert_int_equal(dlock_lock_try(wb, 100, 5000), DLOCK_ETIMEDOUT);   /* write + write */
    assert_int_equal(dlock_lock_try(ra, 0, 5000), DLOCK_OK);   /* the writer reads too */
    assert_true(locked(ra) && locked(wa));
    assert_int_equal(dlock_lock_try(rb, 0, 5000), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(ra), DLOCK_OK);
    assert_int_equal(dlock_lock_release(wa), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(ra);
    dlock_lock_free(rb);
    dlock_lock_free(wa);
    dlock_lock_free(wb);
}

/* Many readers at once: eight threads take the read lock with no wait and
 * hold it together. */
typedef struct together {
    dlock_lock *l;
    pthread_barrier_t *in, *out;
    int rc, release_rc;
} together;

static void *together_main(void *arg)
{
    together *t = arg;
    t->rc = dlock_lock_try(t->l, 0, 10000);
    pthread_barrier_wait(t->in);
    pthread_barrier_wait(t->out);
    if (t->rc == DLOCK_OK)
        t->release_rc = dlock_lock_release(t->l);
    return NULL;
}

static void test_many_readers_at_once(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-many");
    enum { N = 8 };
    pthread_barrier_t in, out;
    pthread_barrier_init(&in, NULL, N + 1);
    pthread_barrier_init(&out, NULL, N + 1);
    dlock_lock *l = rd(cli, name, NULL);
    together t[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        t[i] = (together){l, &in, &out, -1, -1};
        pthread_create(&th[i], NULL, together_main, &t[i]);
    }
    pthread_barrier_wait(&in);   /* every thread tried, none released */
    assert_int_equal(th_int(&srv, "HLEN %s", name), N + 1);   /* mode + 8 readers */
    assert_true(locked(l));
    pthread_barrier_wait(&out);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].rc, DLOCK_OK);
        assert_int_equal(t[i].release_rc, DLOCK_OK);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    pthread_barrier_destroy(&in);
    pthread_barrier_destroy(&out);
    dlock_lock_free(l);
}

/* Reentrancy on both sides (RedissonReadWriteLockTest.testHoldCount), the
 * writer's read holds outliving its write holds (testWriteReadReentrancy),
 * and isLocked per side (testReadLockIsLocked, testWR). */
static void test_reentrancy(void **state)
{
    (void)state;
    char name[128], v[64];
    th_name(name, sizeof(name), "rw-reent");
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL);
    dlock_lock *other = rd(cli, name, "other:1"), *otherw = wr(cli, name, "other:1");
    dlock_lock *sides[2] = {r, w};
    for (int s = 0; s < 2; s++) {
        dlock_lock *l = sides[s];
        assert_int_equal(count(l), 0);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(count(l), 1);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(count(l), 2);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(count(l), 1);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(count(l), 0);
        assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    }
    /* testUnlockFail, testIsHeldByCurrentThreadOtherThread: another thread's
     * read hold is not this thread's. */
    taker k;
    start_taker(&k, r, 0, 5000, -1);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_true(locked(r));
    assert_false(held(r));
    assert_int_equal(dlock_lock_release(r), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_force_release(r, NULL), DLOCK_OK);
    /* testReadLockIsLocked + testWR */
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    assert_false(locked(r));   /* write-held, no read hold */
    assert_int_equal(dlock_lock_try(r, 1000, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(locked(r));
    assert_true(locked(w));
    assert_string_equal(hget(name, "mode", v, sizeof(v)), "write");
    /* testWriteReadReentrancy */
    assert_int_equal(try_elsewhere(r), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_string_equal(hget(name, "mode", v, sizeof(v)), "read");   /* its read hold stays */
    assert_false(locked(w));
    assert_true(locked(r));
    assert_int_equal(dlock_lock_try(w, 0, 5000), DLOCK_EDEADLK);
    assert_int_equal(dlock_lock_try(other, 0, 5000), DLOCK_OK);   /* readers join again */
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_try(w, 0, 5000), DLOCK_OK);
    /* The writer's own read hold released while it writes: still write-held. */
    assert_int_equal(dlock_lock_acquire(r, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_true(locked(w));
    assert_int_equal(try_elsewhere(otherw), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(other);
    dlock_lock_free(otherw);
}

/* ------------------------------------------------------------ read holds */

/* One timeout key per read hold, each with its own lease; the lock lives as
 * long as the longest, any reader's, and a release recomputes it. A name with
 * its own hash tag keeps it (RedissonReadWriteLockTest.testName's name). */
static void hold_keys_on(th_redis *s, dlock_client *c)
{
    char name[128];
    th_name(name, sizeof(name), "rw-ttl");
    dlock_lock *a = rd(c, name, "a:1"), *b = rd(c, name, "b:1");
    assert_int_equal(dlock_lock_try(a, 0, 4000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(a, 0, 8000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(a, 0, 2000), DLOCK_OK);
    long long t1 = th_int(s, "PTTL {%s}:a:1:rwlock_timeout:1", name);
    long long t2 = th_int(s, "PTTL {%s}:a:1:rwlock_timeout:2", name);
    long long t3 = th_int(s, "PTTL {%s}:a:1:rwlock_timeout:3", name);
    assert_true(th_ttl_within(t1, 4000, 1000));
    assert_true(th_ttl_within(t2, 8000, 1000));
    assert_true(th_ttl_within(t3, 2000, 1000));
    assert_int_equal(th_int(s, "EXISTS {%s}:a:1:rwlock_timeout:4", name), 0);
    long long ttl = th_int(s, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 8000, 1000));   /* the longest */
    assert_int_equal(dlock_lock_try(b, 0, 20000), DLOCK_OK);
    assert_true(th_int(s, "PTTL %s", name) > 19000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);   /* back to a's longest */
    ttl = th_int(s, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 8000, 2000));
    assert_int_equal(th_int(s, "EXISTS {%s}:b:1:rwlock_timeout:1", name), 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);   /* the last hold's key goes */
    assert_int_equal(th_int(s, "EXISTS {%s}:a:1:rwlock_timeout:3", name), 0);
    ttl = th_int(s, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 8000, 2000));   /* not the longest: no change */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(th_int(s, "EXISTS {%s}:a:1:rwlock_timeout:2", name), 0);
    ttl = th_int(s, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 4000, 2000));   /* hold 1's */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(th_int(s, "EXISTS %s", name), 0);
    assert_int_equal(th_int(s, "EXISTS {%s}:a:1:rwlock_timeout:1", name), 0);

    /* A writer that keeps a read hold: once it stops writing, the lock lives
     * as long as that hold, not as long as the write lease was. */
    dlock_lock *w = wr(c, name, "a:1");
    assert_int_equal(dlock_lock_try(w, 0, 30000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(a, 0, 2000), DLOCK_OK);
    assert_true(th_int(s, "PTTL %s", name) > 20000);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    ttl = th_int(s, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 2000, 1000));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(th_int(s, "EXISTS %s", name), 0);
    dlock_lock_free(w);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_read_hold_keys(void **state)
{
    (void)state;
    char name[128], key[300];
    hold_keys_on(&srv, cli);

    /* A tagged name: Redisson's name:<owner>:rwlock_timeout:<k>, no braces added. */
    snprintf(name, sizeof(name), "{rw-tag-%d}:abc:key", (int)th_now_ms() % 100000);
    dlock_lock *a = rd(cli, name, "a:1");
    assert_int_equal(dlock_lock_try(a, 0, 5000), DLOCK_OK);
    snprintf(key, sizeof(key), "%s:a:1:rwlock_timeout:1", name);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    dlock_lock_free(a);
}

/* The same where Redis cannot tell expiry times (before 7.0: no PEXPIRETIME,
 * played here by renaming it away): the scripts fall back to remaining times
 * and look at every read hold on each release, as Redisson's do; watchdog
 * renewals of read holds work the same. */
static void test_read_hold_keys_without_expiry_times(void **state)
{
    (void)state;
    th_redis old;
    assert_int_equal(th_redis_start(&old, "--rename-command", "PEXPIRETIME", "", NULL), 0);
    redisReply *r = th_cmd(&old, "PEXPIRETIME x");
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    dlock_client *c = th_client(&old, 600);   /* renewals every 200 ms: room for a loaded machine */
    hold_keys_on(&old, c);
    char name[128];
    th_name(name, sizeof(name), "rw-old-wd");
    dlock_lock *a = rd(c, name, "a:1"), *b = rd(c, name, "b:1");
    assert_int_equal(dlock_lock_acquire(a, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(1400);
    assert_true(held(a) && held(b));
    assert_true(th_int(&old, "PTTL {%s}:a:1:rwlock_timeout:1", name) > 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(th_int(&old, "EXISTS %s", name), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    th_redis_destroy(&old);
}

/* Read-hold lease expiry (RedissonReadWriteLockTest.testReadLockLeaseTimeout,
 * 10x shorter): reader 1 (lease 400) is overtaken by reader 2, which comes and
 * goes; once reader 1's lease is over, a writer takes the lock at once. */
static void test_read_lease_timeout(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-lease");
    dlock_lock *r1 = rd(cli, name, "r:1"), *r2 = rd(cli, name, "r:2"), *w = wr(cli, name, "w:1");
    assert_int_equal(dlock_lock_try(r1, 100, 400), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(dlock_lock_try(r2, 100, 400), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_true(th_int(&srv, "PTTL %s", name) <= 100);   /* r1's remaining lease */
    th_sleep_ms(200);
    assert_int_equal(dlock_lock_try(w, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_ENOTOWNER);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* RedissonReadWriteLockTest.testReadLockExpiration, 10x shorter: readers with
 * leases 1000 (released at 910 ms) and 300 (released at 280 ms); a writer
 * that comes after them gets the lock when the longer one goes, not before
 * and not at its lease. */
static void test_read_lock_expiration(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-expire");
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL);
    taker t1, t2, t3;
    int64_t t0 = th_now_ms();
    start_taker(&t1, r, DLOCK_WAIT_FOREVER, 1000, 910);
    th_sleep_ms(30);
    start_taker(&t2, r, DLOCK_WAIT_FOREVER, 300, 280);
    /* The writer comes once both read (on a loaded machine a thread may take
     * longer than the test's 30 ms to start). */
    int64_t end = th_now_ms() + 250 * th_slack();
    while (th_int(&srv, "HLEN %s", name) != 3 && th_now_ms() < end)
        th_sleep_ms(2);
    start_taker(&t3, w, DLOCK_WAIT_FOREVER, 1000, 0);
    pthread_join(t1.t, NULL);
    pthread_join(t2.t, NULL);
    pthread_join(t3.t, NULL);
    assert_int_equal(t1.rc, DLOCK_OK);
    assert_int_equal(t2.rc, DLOCK_OK);
    /* Each releases before its lease ends; on a loaded machine the holder's
     * thread may wake after its lease: then its hold has expired, as a lease
     * is meant to, and the release says it no longer owns it. */
    assert_true(t1.release_rc == DLOCK_OK ||
                (t1.release_rc == DLOCK_ENOTOWNER && t1.released_at - t1.acquired_at >= 1000));
    assert_true(t2.release_rc == DLOCK_OK ||
                (t2.release_rc == DLOCK_ENOTOWNER && t2.released_at - t2.acquired_at >= 300));
    assert_int_equal(t3.rc, DLOCK_OK);
    int64_t took = t3.acquired_at - t0;
    if (took < 800 || took > 1000 + 500 * th_slack())
        fail_msg("the writer got the lock after %lld ms (800..1000 expected)", (long long)took);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* Lease expiry on each side (testExpireRead, testExpireWrite, 10x shorter):
 * another reader is not held up by a reader with a lease; another writer
 * takes the lock when a writer's lease ends, and that writer's release is
 * then DLOCK_ENOTOWNER. */
static void test_expire_each_side(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-exp2");
    dlock_lock *r = rd(cli, name, NULL), *r2 = rd(cli, name, "r:2");
    dlock_lock *w = wr(cli, name, NULL), *w2 = wr(cli, name, "w:2");
    assert_int_equal(dlock_lock_acquire(r, 200), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(r2, 5000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 100 * th_slack());
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);

    t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(w, 200), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w2, 5000), DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 190 && took < 200 + 500 * th_slack());
    assert_int_equal(dlock_lock_release(w2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_ENOTOWNER);
    dlock_lock_free(r);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_lock_free(w2);
}

/* ------------------------------------------------------------- watchdog */

typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    dlock_lost_reason reason;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
} lost_log;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->reason = reason;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->owner, sizeof(g->owner), "%s", owner);
    pthread_mutex_unlock(&g->mu);
}

static int lost_calls(lost_log *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static long long evalsha_calls(void)
{
    redisReply *r = th_cmd(&srv, "INFO commandstats");
    const char *p = strstr(r->str, "cmdstat_evalsha:calls=");
    long long n = p ? atoll(p + 22) : 0;
    freeReplyObject(r);
    return n;
}

/* Read holds taken with the watchdog (timeout 300 ms) outlive three
 * timeouts: each hold's timeout keys and the lock are renewed, in batches:
 * 20 read holds (10 owners on one name, 2 holds each, and 10 names) kept for
 * 1 s need at least 3 renewals each, 60 scripts one by one; batched, one
 * script per period (100 ms) renews them all. Then a writer that also reads
 * (RedissonReadWriteLockTest.testReadWriteTTL): both its holds are renewed,
 * and its read hold keeps the lock once it stops writing. */
static void test_watchdog_renews_read_holds(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 600);   /* renewals every 200 ms */
    enum { N = 10 };
    char name[128], names[N][128], owner[32];
    th_name(name, sizeof(name), "rw-wd");
    dlock_lock *shared[N], *own[N];
    for (int i = 0; i < N; i++) {
        snprintf(owner, sizeof(owner), "o:%d", i);
        shared[i] = rd(c, name, owner);
        assert_int_equal(dlock_lock_acquire(shared[i], DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(shared[i], DLOCK_WATCHDOG), DLOCK_OK);
        own[i] = rd(c, th_name(names[i], sizeof(names[i]), "rw-wd-own"), NULL);
        assert_int_equal(dlock_lock_acquire(own[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    assert_int_equal(dlock__watchdog_count(c->wd), 2 * N);
    long long e0 = evalsha_calls();
    th_sleep_ms(2000);
    long long scripts = evalsha_calls() - e0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(count(shared[i]), 2);
        assert_true(th_int(&srv, "PTTL {%s}:o:%d:rwlock_timeout:1", name, i) > 0);
        assert_true(th_int(&srv, "PTTL {%s}:o:%d:rwlock_timeout:2", name, i) > 0);
        assert_true(held(own[i]));
        assert_true(th_int(&srv, "PTTL %s", names[i]) > 0);
    }
    assert_true(th_int(&srv, "PTTL %s", name) > 0);
    /* About ten ticks; twice that if the holds fell due in two groups. */
    if (scripts < 3 || scripts > 25)
        fail_msg("%lld renewal scripts for 20 read holds over 2 s", scripts);
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_lock_release(shared[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_release(shared[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_release(own[i]), DLOCK_OK);
        dlock_lock_free(shared[i]);
        dlock_lock_free(own[i]);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);

    dlock_lock *w = wr(c, name, NULL), *wr_r = rd(c, name, NULL);
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(wr_r, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(700);
    assert_true(held(w) && held(wr_r));
    assert_true(th_int(&srv, "PTTL %s", name) > 0);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    th_sleep_ms(700);
    assert_true(held(wr_r));
    assert_true(th_int(&srv, "PTTL %s", name) > 0);
    assert_int_equal(dlock_lock_release(wr_r), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(w);
    dlock_lock_free(wr_r);
    dlock_client_close(c);
}

/* A lease acquisition by an owner whose holds the watchdog renews never
 * shortens the lock's TTL on either side (a read acquire keeps the longest
 * TTL, a write reentry adds the lease): it is no loss, and the watchdog's
 * holds stay renewed. */
static void test_lease_reentry_beside_watchdog(void **state)
{
    (void)state;
    /* A watchdog of 300 ms (renewals every 100 ms), longer on a busy machine,
     * where a renewal can come late by more than the 200 ms it has spare. */
    dlock_client *c = th_client(&srv, 300 * th_slack());
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    char name[128], wname[128];
    th_name(name, sizeof(name), "rw-mixlease");
    th_name(wname, sizeof(wname), "rw-mixlease-w");
    dlock_lock *r = rd(c, name, NULL), *w = wr(c, wname, NULL);
    dlock_lock_set_lost_callback(r, on_lost, &g);
    dlock_lock_set_lost_callback(w, on_lost, &g);
    assert_int_equal(dlock_lock_acquire(r, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 50), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_OK);
    th_sleep_ms(1000 * th_slack());   /* a few renewals */
    assert_int_equal(lost_calls(&g), 0);
    assert_int_equal(count(r), 2);
    char me[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(c, me, sizeof(me)), DLOCK_OK);
    assert_true(th_int(&srv, "PTTL {%s}:%s:rwlock_timeout:1", name, me) > 0);
    assert_true(held(r) && held(w));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_release(r), DLOCK_OK);
        assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s %s", name, wname), 0);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* A read hold whose lock is deleted behind its back is reported lost, once,
 * naming the lock and the owner; its release is then DLOCK_ENOTOWNER. */
static void test_lost_read_hold(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 300);
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    char name[128], me[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rw-lost");
    dlock_lock *r = rd(c, name, NULL);
    dlock_lock_set_lost_callback(r, on_lost, &g);
    assert_int_equal(dlock_lock_acquire(r, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_client_owner_id(c, me, sizeof(me)), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    int64_t end = th_now_ms() + 1000 * th_slack();
    while (lost_calls(&g) == 0 && th_now_ms() < end)
        th_sleep_ms(5);
    assert_int_equal(lost_calls(&g), 1);
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    assert_string_equal(g.name, name);
    assert_string_equal(g.owner, me);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    assert_int_equal(dlock_lock_release(r), DLOCK_ENOTOWNER);
    th_sleep_ms(300);
    assert_int_equal(lost_calls(&g), 1);
    dlock_lock_free(r);
    dlock_client_close(c);
}

/* RedissonReadWriteLockTest.testMultiInstanceReadLockZombieCleanup, scaled:
 * client A's reader goes away without releasing (its client closes); client
 * B's reader keeps the lock renewed. Once A's hold has expired, B's release
 * deletes the lock (A's field with it) and a writer gets in at once. */
static void test_zombie_reader_cleanup(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-zombie");
    dlock_client *a = th_client(&srv, 300), *b = th_client(&srv, 300);
    dlock_lock *ra = rd(a, name, NULL), *rb = rd(b, name, NULL), *w = wr(b, name, NULL);
    assert_int_equal(dlock_lock_acquire(ra, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_lock_free(ra);
    dlock_client_close(a);
    assert_int_equal(dlock_lock_acquire(rb, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(300 + 400);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 3);   /* mode, a's field, b's */
    assert_int_equal(dlock_lock_release(rb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_try(w, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(rb);
    dlock_lock_free(w);
    dlock_client_close(b);
}

/* ------------------------------------------------------- concurrency */

/* RedissonReadWriteLockTest.testConcurrency*, checked: threads of two clients
 * take the read or the write lock at random, 40 times each, waiting as long
 * as it takes; a writer is always alone, readers never meet a writer. */
static atomic_int readers_in, writers_in, violations;

typedef struct mixer {
    dlock_client *c;
    const char *name;
    unsigned seed;
    int done;
    pthread_t t;
} mixer;

static void *mixer_main(void *arg)
{
    mixer *m = arg;
    dlock_lock *r = rd(m->c, m->name, NULL), *w = wr(m->c, m->name, NULL);
    for (int i = 0; i < 40; i++) {
        int write = rand_r(&m->seed) % 3 == 0;
        dlock_lock *l = write ? w : r;
        if (dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK)
            break;
        if (write) {
            if (atomic_fetch_add(&writers_in, 1) != 0 || atomic_load(&readers_in) != 0)
                atomic_fetch_add(&violations, 1);
        } else {
            atomic_fetch_add(&readers_in, 1);
            if (atomic_load(&writers_in) != 0)
                atomic_fetch_add(&violations, 1);
        }
        th_sleep_ms(1 + rand_r(&m->seed) % 3);
        atomic_fetch_sub(write ? &writers_in : &readers_in, 1);
        if (dlock_lock_release(l) != DLOCK_OK)
            break;
        m->done++;
    }
    dlock_lock_free(r);
    dlock_lock_free(w);
    return NULL;
}

static void test_concurrency_mix(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-mix");
    dlock_client *c2 = th_client(&srv, 0);
    enum { T = 6 };
    mixer m[T];
    for (int i = 0; i < T; i++) {
        m[i] = (mixer){i % 2 ? c2 : cli, name, (unsigned)(i * 7919 + 1), 0, 0};
        pthread_create(&m[i].t, NULL, mixer_main, &m[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(m[i].t, NULL);
        assert_int_equal(m[i].done, 40);
    }
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_client_close(c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusion_matrix),
        cmocka_unit_test(test_many_readers_at_once),
        cmocka_unit_test(test_reentrancy),
        cmocka_unit_test(test_read_hold_keys),
        cmocka_unit_test(test_read_hold_keys_without_expiry_times),
        cmocka_unit_test(test_read_lease_timeout),
        cmocka_unit_test(test_read_lock_expiration),
        cmocka_unit_test(test_expire_each_side),
        cmocka_unit_test(test_watchdog_renews_read_holds),
        cmocka_unit_test(test_lease_reentry_beside_watchdog),
        cmocka_unit_test(test_lost_read_hold),
        cmocka_unit_test(test_zombie_reader_cleanup),
        cmocka_unit_test(test_concurrency_mix),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
