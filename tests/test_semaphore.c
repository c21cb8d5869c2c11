/* The semaphore (Redisson's RSemaphore): Redisson's own scenarios, waits
 * woken by pub/sub with nothing sent while idle, n-permit waits woken only
 * when enough may be there, a release of many waking as many as it serves,
 * threads and processes never above the permits, interop both ways with the
 * Redisson side played by plain Redis commands, and bad input. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

/* ------------------------------------------------------------- helpers */

static dlock_semaphore *sem(const char *prefix, char *name, size_t size)
{
    th_name(name, size, prefix);
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    return s;
}

/* On a cluster the first call of a script on a node answers NOSCRIPT and is
 * sent again once the script is loaded: two EVALSHA. The tests that count
 * scripts run the release and acquire scripts once first, on the
 * semaphore's node (net zero permits). */
static void load_scripts(dlock_semaphore *s)
{
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 1), DLOCK_OK);
}

static int64_t avail(dlock_semaphore *s)
{
    int64_t n = -999;
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    return n;
}

/* The key as Redis holds it ("" when absent). */
static void raw_value(const char *key, char *buf, size_t size)
{
    redisReply *r = th_cmd(&srv, "GET %s", key);
    snprintf(buf, size, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    if (r)
        freeReplyObject(r);
}

/* Subscribers of a channel, as Redis counts them. */
static long long numsub(const char *channel)
{
    return th_numsub(&srv, channel);
}

static int await_numsub(const char *channel, long long n, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (numsub(channel) != n && th_now_ms() < end)
        th_sleep_ms(5);
    return numsub(channel) == n;
}

/* A thread acquiring n permits with a wait, then holding them. */
typedef struct waiter {
    dlock_semaphore *s;
    int64_t n;
    int64_t wait_ms;
    dlock_cancel *cancel;
    int rc;
    volatile int done;
    int64_t done_at;
    pthread_t t;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_semaphore_acquire_opts(
        w->s, w->n, &(dlock_wait_opts){.wait_ms = w->wait_ms, .cancel = w->cancel});
    w->done_at = th_now_ms();
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void start_waiter(waiter *w, dlock_semaphore *s, int64_t n, int64_t wait_ms)
{
    memset(w, 0, sizeof(*w));
    w->s = s;
    w->n = n;
    w->wait_ms = wait_ms;
    pthread_create(&w->t, NULL, waiter_main, w);
}

static int is_done(waiter *w) { return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE); }

static int count_done(waiter *w, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += is_done(&w[i]);
    return k;
}

static int await_done(waiter *w, int n, int want, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (count_done(w, n) < want && th_now_ms() < end)
        th_sleep_ms(2);
    return count_done(w, n);
}

/* ------------------------------------------------- Redisson's scenarios */

static void test_try_set_permits(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-tryset", name, sizeof(name));
    int set = -1;
    assert_int_equal(dlock_semaphore_try_set_permits(s, 10, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    assert_int_equal(avail(s), 10);
    assert_int_equal(dlock_semaphore_try_set_permits(s, 15, &set), DLOCK_OK);
    assert_int_equal(set, 0);
    assert_int_equal(avail(s), 10);
    /* Unconditionally, the value Redis keeps is the count itself. */
    assert_int_equal(dlock_semaphore_set_permits(s, 3), DLOCK_OK);
    assert_int_equal(avail(s), 3);
    char v[32];
    raw_value(name, v, sizeof(v));
    assert_string_equal(v, "3");
    dlock_semaphore_free(s);
}

static void test_add_permits(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-add", name, sizeof(name));
    assert_int_equal(dlock_semaphore_try_set_permits(s, 10, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 10), DLOCK_OK);
    assert_int_equal(avail(s), 0);
    assert_int_equal(dlock_semaphore_add_permits(s, 4), DLOCK_OK);
    assert_int_equal(avail(s), 4);
    assert_int_equal(dlock_semaphore_release(s, 10), DLOCK_OK);
    assert_int_equal(avail(s), 14);
    assert_int_equal(dlock_semaphore_acquire(s, 5), DLOCK_OK);
    assert_int_equal(avail(s), 9);
    dlock_semaphore_free(s);
}

/* Permits taken away: the count goes negative, acquirers wait until
 * releases bring it back above their need. */
static void test_reduce_permits(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-reduce", name, sizeof(name));
    assert_int_equal(dlock_semaphore_try_set_permits(s, 10, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 10), DLOCK_OK);
    assert_int_equal(dlock_semaphore_add_permits(s, -5), DLOCK_OK);
    assert_int_equal(avail(s), -5);
    assert_int_equal(dlock_semaphore_try(s, 1, 0), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_semaphore_release(s, 10), DLOCK_OK);
    assert_int_equal(avail(s), 5);
    assert_int_equal(dlock_semaphore_acquire(s, 5), DLOCK_OK);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

/* Releases without any set: the semaphore starts at 0 (Redisson's
 * testAcquireWithoutSetPermits, testReleaseWithoutPermits). */
static void test_release_without_set(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-noset", name, sizeof(name));
    assert_int_equal(avail(s), 0);
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    assert_int_equal(avail(s), 1);
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try(s, 2, 0), DLOCK_OK);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

static void test_drain(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-drain", name, sizeof(name));
    int64_t d = -1;
    assert_int_equal(dlock_semaphore_drain(s, &d), DLOCK_OK);
    assert_int_equal(d, 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);   /* nothing created */
    assert_int_equal(dlock_semaphore_try_set_permits(s, 10, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 3), DLOCK_OK);
    assert_int_equal(dlock_semaphore_drain(s, &d), DLOCK_OK);
    assert_int_equal(d, 7);
    assert_int_equal(avail(s), 0);
    /* A negative count is given back, as Java's drainPermits does. */
    assert_int_equal(dlock_semaphore_add_permits(s, -4), DLOCK_OK);
    assert_int_equal(dlock_semaphore_drain(s, &d), DLOCK_OK);
    assert_int_equal(d, -4);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

static void test_release_acquire(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-relacq", name, sizeof(name));
    assert_int_equal(dlock_semaphore_try_set_permits(s, 10, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 1), DLOCK_OK);
    assert_int_equal(avail(s), 9);
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    assert_int_equal(avail(s), 10);
    assert_int_equal(dlock_semaphore_acquire(s, 5), DLOCK_OK);
    assert_int_equal(avail(s), 5);
    assert_int_equal(dlock_semaphore_release(s, 5), DLOCK_OK);
    assert_int_equal(avail(s), 10);
    dlock_semaphore_free(s);
}

/* testTryNAcquire: 3 of 5 taken; 4 more come once two single releases
 * (500 ms apart) brought the count to 4. */
static void *release_twice(void *arg)
{
    dlock_semaphore *s = arg;
    th_sleep_ms(500);
    dlock_semaphore_release(s, 1);
    th_sleep_ms(500);
    dlock_semaphore_release(s, 1);
    return NULL;
}

static void test_try_n_acquire(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-tryn", name, sizeof(name));
    assert_int_equal(dlock_semaphore_try_set_permits(s, 5, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try(s, 3, 0), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try(s, 4, 0), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "4 permits asked, 2 available"));
    pthread_t t;
    int64_t t0 = th_now_ms();
    pthread_create(&t, NULL, release_twice, s);
    assert_int_equal(dlock_semaphore_try(s, 4, 5000 * th_slack()), DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    pthread_join(t, NULL);
    /* Not before the second release: a count of 3 does not serve 4. */
    assert_true(took >= 950);
    assert_true(took < 1000 + 1000 * th_slack());
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

/* ------------------------------------------------ waiting by pub/sub */

/* testBlockingAcquire, and a user's check that waiting costs nothing: the
 * waiter sends no command while it sleeps, and the release wakes it. */
static void test_wait_sends_nothing(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-idle", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_semaphore_try_set_permits(s, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 1), DLOCK_OK);
    waiter w;
    start_waiter(&w, s, 1, DLOCK_WAIT_FOREVER);
    assert_true(await_numsub(ch, 1, 5000));
    /* Counted on a single server only: a deployment's replicas and sentinels
     * send their own commands to the primary. */
    if (!th_deployed(&srv)) {
        long long c0 = th_calls_settled(&srv, 3000);   /* its retry after subscribing is done */
        th_sleep_ms(700);
        long long idle = th_calls(&srv, NULL) - c0;
        assert_int_equal(idle, 0);
    }
    assert_false(is_done(&w));
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.done_at - t0 < 500 * th_slack());
    assert_int_equal(dlock_semaphore_try(s, 1, 0), DLOCK_ETIMEDOUT);
    assert_int_equal(avail(s), 0);
    assert_true(await_numsub(ch, 0, 5000));   /* unsubscribed once done */
    dlock_semaphore_free(s);
}

/* testBlockingNAcquire: a waiter for 4 with 2 there sleeps through a release
 * that makes 3 (its retry would be in vain), and is woken by the one that
 * makes 4: exactly one acquire script per release that can serve it. */
static void test_n_permit_wait(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-nwait", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_semaphore_try_set_permits(s, 5, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 3), DLOCK_OK);
    load_scripts(s);
    assert_int_equal(avail(s), 2);
    long long before = th_calls(&srv, "evalsha");
    waiter w;
    start_waiter(&w, s, 4, DLOCK_WAIT_FOREVER);
    assert_true(await_numsub(ch, 1, 5000));
    /* asleep: it made its two attempts (before and after subscribing; on a
     * cluster the second waits for a new connection to the slot's node) */
    int64_t end = th_now_ms() + 5000 * th_slack();
    while (th_calls(&srv, "evalsha") - before < 2 && th_now_ms() < end)
        th_sleep_ms(5);
    th_sleep_ms(100);
    long long e0 = th_calls(&srv, "evalsha");
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);   /* 3: not enough */
    th_sleep_ms(300);
    assert_false(is_done(&w));
    assert_int_equal(th_calls(&srv, "evalsha") - e0, 1);   /* the release alone */
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);   /* 4 */
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(th_calls(&srv, "evalsha") - e0, 3);   /* two releases, one acquire */
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

/* A release of 3 permits wakes 3 single-permit waiters of 5, and not the
 * other 2: each woken one takes its permit with one script. */
static void test_release_wakes_as_many_as_it_serves(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-many", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_semaphore_set_permits(s, 0), DLOCK_OK);
    load_scripts(s);
    enum { N = 5 };
    waiter w[N];
    long long before = th_calls(&srv, "evalsha");
    for (int i = 0; i < N; i++)
        start_waiter(&w[i], s, 1, DLOCK_WAIT_FOREVER);
    assert_true(await_numsub(ch, 1, 5000));
    /* all five asleep: each made its two attempts */
    int64_t end = th_now_ms() + 5000 * th_slack();
    while (th_calls(&srv, "evalsha") - before < 2 * N && th_now_ms() < end)
        th_sleep_ms(5);
    th_sleep_ms(100);
    long long e0 = th_calls(&srv, "evalsha");
    assert_int_equal(dlock_semaphore_release(s, 3), DLOCK_OK);
    assert_int_equal(await_done(w, N, 3, 3000), 3);
    th_sleep_ms(300);
    assert_int_equal(count_done(w, N), 3);
    assert_int_equal(th_calls(&srv, "evalsha") - e0, 1 + 3);
    assert_int_equal(avail(s), 0);
    assert_int_equal(dlock_semaphore_release(s, 2), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        assert_int_equal(w[i].rc, DLOCK_OK);
    }
    assert_int_equal(th_calls(&srv, "evalsha") - e0, 1 + 3 + 1 + 2);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

/* A message's count is stale by the time the woken retry: another process
 * may have taken part of it. Here the message says 3 and 2 are there: the
 * waiter for 3 (first in line) is woken and finds 2; it passes them to the
 * waiter for 1 the message did not wake, which takes one. */
static void test_leftover_reaches_smaller_waiter(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-leftover", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_semaphore_set_permits(s, 0), DLOCK_OK);
    load_scripts(s);
    waiter big, small;
    long long e0 = th_calls(&srv, "evalsha");
    start_waiter(&big, s, 3, DLOCK_WAIT_FOREVER);
    assert_true(await_numsub(ch, 1, 5000));
    int64_t end = th_now_ms() + 5000 * th_slack();
    while (th_calls(&srv, "evalsha") - e0 < 2 && th_now_ms() < end)
        th_sleep_ms(5);
    start_waiter(&small, s, 1, DLOCK_WAIT_FOREVER);
    while (th_calls(&srv, "evalsha") - e0 < 4 && th_now_ms() < end)
        th_sleep_ms(5);
    th_sleep_ms(100);
    freeReplyObject(th_cmd(&srv, "SET %s 2", name));
    assert_true(th_publish(&srv, ch, "3") >= 0);
    end = th_now_ms() + 2000 * th_slack();
    while (!is_done(&small) && th_now_ms() < end)
        th_sleep_ms(5);
    assert_true(is_done(&small));
    pthread_join(small.t, NULL);
    assert_int_equal(small.rc, DLOCK_OK);
    assert_false(is_done(&big));
    assert_int_equal(avail(s), 1);
    assert_int_equal(dlock_semaphore_release(s, 2), DLOCK_OK);
    pthread_join(big.t, NULL);
    assert_int_equal(big.rc, DLOCK_OK);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

static void test_cancel_and_timeout(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-cancel", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_semaphore_set_permits(s, 1), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_semaphore_try(s, 2, 300), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 290 && took < 300 + 1000 * th_slack());
    assert_non_null(strstr(dlock_last_error(), "2 permits asked, 1 available"));
    /* The timed-out waiter's UNSUBSCRIBE goes out after it returns: wait for
     * it, or the count below could see the old subscription going away. */
    assert_true(await_numsub(ch, 0, 5000));

    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    waiter w;
    memset(&w, 0, sizeof(w));
    w.s = s;
    w.n = 2;
    w.wait_ms = DLOCK_WAIT_FOREVER;
    w.cancel = tok;
    pthread_create(&w.t, NULL, waiter_main, &w);
    assert_true(await_numsub(ch, 1, 5000));
    t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.done_at - t0 < 500 * th_slack());
    assert_int_equal(avail(s), 1);   /* nothing taken */
    assert_true(await_numsub(ch, 0, 5000));
    dlock_cancel_free(tok);
    dlock_semaphore_free(s);
}

/* ------------------------------------------------------- concurrency */

typedef struct cycler {
    dlock_semaphore *s;
    int iters;
    int rc;
    pthread_t t;
} cycler;

static int inside, most_inside;
static pthread_mutex_t inside_mu = PTHREAD_MUTEX_INITIALIZER;

static void *cycler_main(void *arg)
{
    cycler *c = arg;
    for (int i = 0; i < c->iters && c->rc == DLOCK_OK; i++) {
        if ((c->rc = dlock_semaphore_acquire(c->s, 1)) != DLOCK_OK)
            break;
        pthread_mutex_lock(&inside_mu);
        if (++inside > most_inside)
            most_inside = inside;
        pthread_mutex_unlock(&inside_mu);
        usleep(200);
        pthread_mutex_lock(&inside_mu);
        inside--;
        pthread_mutex_unlock(&inside_mu);
        c->rc = dlock_semaphore_release(c->s, 1);
    }
    return NULL;
}

/* testConcurrency_SingleInstance: 8 threads x 100 cycles on 2 permits;
 * never more than 2 inside, every permit back at the end. */
static void test_concurrency_threads(void **state)
{
    (void)state;
    char name[128];
    dlock_semaphore *s = sem("sem-threads", name, sizeof(name));
    assert_int_equal(dlock_semaphore_try_set_permits(s, 2, NULL), DLOCK_OK);
    enum { T = 8 };
    cycler c[T];
    inside = most_inside = 0;
    for (int i = 0; i < T; i++) {
        c[i] = (cycler){s, 100, DLOCK_OK, 0};
        pthread_create(&c[i].t, NULL, cycler_main, &c[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(c[i].t, NULL);
        assert_int_equal(c[i].rc, DLOCK_OK);
    }
    assert_int_equal(most_inside, 2);
    assert_int_equal(avail(s), 2);
    dlock_semaphore_free(s);
}

/* testConcurrency_MultiInstance: 4 processes x 3 threads on 3 permits,
 * counting themselves in Redis while inside. */
static void test_concurrency_processes(void **state)
{
    (void)state;
    char name[128], inside_key[160];
    dlock_semaphore *s = sem("sem-procs", name, sizeof(name));
    snprintf(inside_key, sizeof(inside_key), "%s:inside", name);
    assert_int_equal(dlock_semaphore_try_set_permits(s, 3, NULL), DLOCK_OK);
    enum { P = 4 };
    pid_t pids[P];
    int fds[P];
    for (int i = 0; i < P; i++) {
        pids[i] = th_spawn(&fds[i], DLOCK_TEST_WORKER, "sem", srv.url, name, "3", "60",
                           inside_key, NULL);
        assert_true(pids[i] > 0);
    }
    long long most = 0;
    for (int i = 0; i < P; i++) {
        char line[64];
        long long m = -1;
        assert_int_equal(th_read_line(fds[i], line, sizeof(line), 120000), 0);
        assert_int_equal(sscanf(line, "done %lld", &m), 1);
        if (m > most)
            most = m;
        assert_int_equal(th_wait(pids[i], 10000), 0);
        close(fds[i]);
    }
    assert_true(most >= 1 && most <= 3);
    assert_int_equal(avail(s), 3);
    dlock_semaphore_free(s);
}

/* ------------------------------------------------------------ interop */

/* Redisson's side, played with Redis commands: its trySetPermits (SET +
 * PUBLISH of the count) and its release (INCRBY + PUBLISH of the new count)
 * wake dlock's waiter; its acquire script's test (GET >= n, DECRBY) works on
 * what dlock writes. A name with its own hash tag keeps it. */
static void test_interop_redisson_wakes_dlock(void **state)
{
    (void)state;
    char name[128], tagged[160], ch[200];
    th_name(name, sizeof(name), "sem-interop");
    snprintf(tagged, sizeof(tagged), "{%s}:pool", name);
    snprintf(ch, sizeof(ch), "redisson_sc:%s", tagged);
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_get(cli, tagged, &s), DLOCK_OK);
    waiter w;
    start_waiter(&w, s, 2, DLOCK_WAIT_FOREVER);
    assert_true(await_numsub(ch, 1, 5000));
    /* trySetPermits(1): not enough for 2 */
    freeReplyObject(th_cmd(&srv, "SET %s 1", tagged));
    assert_true(th_publish(&srv, ch, "1") >= 0);
    th_sleep_ms(300);
    assert_false(is_done(&w));
    /* release(1): INCRBY, PUBLISH the new count */
    assert_int_equal(th_int(&srv, "INCRBY %s 1", tagged), 2);
    assert_true(th_publish(&srv, ch, "2") >= 0);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(avail(s), 0);
    dlock_semaphore_free(s);
}

static void test_interop_dlock_wakes_redisson(void **state)
{
    (void)state;
    char name[128], ch[160];
    dlock_semaphore *s = sem("sem-interop2", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    redisReply *r;
    assert_int_equal(dlock_semaphore_try_set_permits(s, 2, NULL), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "2");   /* the count, as Redisson publishes */
    freeReplyObject(r);
    assert_int_equal(dlock_semaphore_release(s, 3), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "5");   /* the new count */
    freeReplyObject(r);
    redisFree(sub);
    /* Redisson's tryAcquire(4): its script's test and DECRBY on dlock's value */
    r = th_cmd(&srv, "EVAL %s 1 %s 4",
               "local v = redis.call('get', KEYS[1]); if v ~= false and tonumber(v) >= "
               "tonumber(ARGV[1]) then redis.call('decrby', KEYS[1], ARGV[1]); return 1 end; "
               "return 0",
               name);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(avail(s), 1);
    dlock_semaphore_free(s);
}

/* ------------------------------------------------------------ bad input */

/* Every refusal leaves the key as it was. */
static void test_bad_input(void **state)
{
    (void)state;
    char name[128], v[32];
    dlock_semaphore *s = sem("sem-bad", name, sizeof(name));
    assert_int_equal(dlock_semaphore_set_permits(s, 5), DLOCK_OK);
    const int64_t bad_n[] = {0, -1, DLOCK_COUNT_MAX + 1, INT64_MIN};
    for (size_t i = 0; i < sizeof(bad_n) / sizeof(bad_n[0]); i++) {
        assert_int_equal(dlock_semaphore_acquire(s, bad_n[i]), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "permits to acquire"));
        assert_int_equal(dlock_semaphore_try(s, bad_n[i], 0), DLOCK_EINVAL);
        assert_int_equal(dlock_semaphore_release(s, bad_n[i]), DLOCK_EINVAL);
    }
    assert_int_equal(dlock_semaphore_add_permits(s, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_add_permits(s, DLOCK_COUNT_MAX + 1), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_set_permits(s, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_try_set_permits(s, DLOCK_COUNT_MAX + 1, NULL),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_try(s, 1, -2), DLOCK_EINVAL);
    /* a count pushed past the maximum: refused by the script */
    assert_int_equal(dlock_semaphore_release(s, DLOCK_COUNT_MAX), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "would hold"));
    assert_int_equal(dlock_semaphore_add_permits(s, -DLOCK_COUNT_MAX), DLOCK_OK);
    assert_int_equal(dlock_semaphore_add_permits(s, -10), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_add_permits(s, DLOCK_COUNT_MAX), DLOCK_OK);
    raw_value(name, v, sizeof(v));
    assert_string_equal(v, "5");
    assert_int_equal(dlock_semaphore_available(s, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_acquire(NULL, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_release(NULL, 1), DLOCK_EINVAL);
    dlock_semaphore *x = (dlock_semaphore *)1;
    assert_int_equal(dlock_semaphore_get(cli, "", &x), DLOCK_EINVAL);
    assert_null(x);
    assert_int_equal(dlock_semaphore_get(cli, NULL, &x), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_get(NULL, "a", &x), DLOCK_EINVAL);
    char longname[DLOCK_NAME_MAX + 2];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(dlock_semaphore_get(cli, longname, &x), DLOCK_ENAMETOOLONG);
    dlock_semaphore_free(NULL);
    dlock_semaphore_free(s);
}

/* A key of another type (a hash, a list, a string that is no count) is
 * somebody's data: every call says so, and none touches it. */
static void test_wrong_type(void **state)
{
    (void)state;
    const char *kinds[] = {"HSET %s f v", "RPUSH %s a", "SET %s hello"};
    for (size_t k = 0; k < 3; k++) {
        char name[128];
        dlock_semaphore *s = sem("sem-wrong", name, sizeof(name));
        freeReplyObject(th_cmd(&srv, kinds[k], name));
        redisReply *before = th_cmd(&srv, "DUMP %s", name);
        int64_t n;
        int set;
        assert_int_equal(dlock_semaphore_acquire(s, 1), DLOCK_EWRONGTYPE);
        assert_non_null(strstr(dlock_last_error(), "is not a semaphore"));
        assert_int_equal(dlock_semaphore_try(s, 1, 100), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_add_permits(s, 2), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_set_permits(s, 2), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_try_set_permits(s, 2, &set), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_drain(s, &n), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_EWRONGTYPE);
        redisReply *after = th_cmd(&srv, "DUMP %s", name);
        assert_int_equal(before->len, after->len);
        assert_memory_equal(before->str, after->str, before->len);
        freeReplyObject(before);
        freeReplyObject(after);
        dlock_semaphore_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_try_set_permits),
        cmocka_unit_test(test_add_permits),
        cmocka_unit_test(test_reduce_permits),
        cmocka_unit_test(test_release_without_set),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_release_acquire),
        cmocka_unit_test(test_try_n_acquire),
        cmocka_unit_test(test_wait_sends_nothing),
        cmocka_unit_test(test_n_permit_wait),
        cmocka_unit_test(test_release_wakes_as_many_as_it_serves),
        cmocka_unit_test(test_leftover_reaches_smaller_waiter),
        cmocka_unit_test(test_cancel_and_timeout),
        cmocka_unit_test(test_concurrency_threads),
        cmocka_unit_test(test_concurrency_processes),
        cmocka_unit_test(test_interop_redisson_wakes_dlock),
        cmocka_unit_test(test_interop_dlock_wakes_redisson),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrong_type),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
