/* dlock_client_stats: each counter and histogram against activity the test
 * makes happen (an uncontended acquire, a waiter woken by the release, a
 * wake-up that finds the lock taken again, batched renewals, a hold lost to
 * a deleted key, a reconnect after a restart), the bucket scheme, and the
 * size rule. */
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

static dlock_stats stats_once(dlock_client *c)
{
    dlock_stats s;
    memset(&s, 0xff, sizeof(s));
    assert_int_equal(dlock_client_stats(c, &s, sizeof(s)), DLOCK_OK);
    return s;
}

/* Every value is read atomically but not all at one instant (dlock.h): a
 * round trip the io thread has under way (a subscription's end) may be
 * counted in one field and not yet in its histogram. Read again until the
 * two agree (bounded). */
static dlock_stats stats(dlock_client *c)
{
    dlock_stats s = stats_once(c);
    int64_t end = th_now_ms() + 2000 * th_slack();
    while (s.roundtrip.count != s.roundtrips && th_now_ms() < end) {
        th_sleep_ms(5);
        s = stats_once(c);
    }
    return s;
}

static uint64_t bucket_sum(const dlock_histogram *h)
{
    uint64_t n = 0;
    for (int b = 0; b < DLOCK_STATS_BUCKETS; b++)
        n += h->bucket[b];
    return n;
}

/* The bucket a duration of `us` falls in. */
static int bucket_of(uint64_t us)
{
    for (int b = 0; b < DLOCK_STATS_BUCKETS; b++)
        if (us < dlock_stats_bucket_limit_us(b))
            return b;
    return DLOCK_STATS_BUCKETS - 1;
}

static void test_bucket_scheme(void **state)
{
    (void)state;
    assert_int_equal(dlock_stats_bucket_limit_us(0), 1);
    assert_int_equal(dlock_stats_bucket_limit_us(1), 2);
    assert_int_equal(dlock_stats_bucket_limit_us(10), 1024);
    assert_int_equal(dlock_stats_bucket_limit_us(DLOCK_STATS_BUCKETS - 2),
                     1ULL << (DLOCK_STATS_BUCKETS - 2));
    assert_true(dlock_stats_bucket_limit_us(DLOCK_STATS_BUCKETS - 1) == UINT64_MAX);
    assert_true(dlock_stats_bucket_limit_us(-1) == UINT64_MAX);
    assert_true(dlock_stats_bucket_limit_us(DLOCK_STATS_BUCKETS) == UINT64_MAX);
}

static void test_bad_arguments_and_size(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 0);
    dlock_stats s;
    assert_int_equal(dlock_client_stats(NULL, &s, sizeof(s)), DLOCK_EINVAL);
    assert_int_equal(dlock_client_stats(c, NULL, sizeof(s)), DLOCK_EINVAL);
    assert_int_equal(dlock_client_ping(c), DLOCK_OK);
    /* An older, shorter struct: only its bytes are written. */
    unsigned char buf[sizeof(dlock_stats) + 8];
    memset(buf, 0xab, sizeof(buf));
    size_t part = offsetof(dlock_stats, renewals);
    assert_int_equal(dlock_client_stats(c, (dlock_stats *)buf, part), DLOCK_OK);
    for (size_t i = part; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xab);
    dlock_client_close(c);
}

typedef struct releaser {
    dlock_lock *l;
    int64_t after_ms;
    int rc;
    pthread_t t;
} releaser;

static void *release_later(void *arg)
{
    releaser *r = arg;
    th_sleep_ms(r->after_ms);
    r->rc = dlock_lock_release(r->l);
    return NULL;
}

/* A holds; B waits 300 ms and is woken by A's release: B counts one
 * acquisition, one wait, one used wake-up, an acquire wait of ~300 ms and one
 * handoff gap; A one acquisition that did not wait. */
static void test_acquire_wait_and_handoff(void **state)
{
    (void)state;
    dlock_client *a = th_client(&srv, 0), *b = th_client(&srv, 0);
    char name[128];
    th_name(name, sizeof(name), "stats");
    dlock_lock *la, *lb;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(a, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(a, name, owner, &la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(b, name, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, 10000), DLOCK_OK);
    releaser r = {la, 300, -1, 0};
    pthread_create(&r.t, NULL, release_later, &r);
    assert_int_equal(dlock_lock_acquire(lb, 10000), DLOCK_OK);
    pthread_join(r.t, NULL);
    assert_int_equal(r.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);

    dlock_stats sa = stats(a), sb = stats(b);
    assert_int_equal(sa.acquisitions, 1);
    assert_int_equal(sa.waits, 0);
    assert_int_equal(sa.acquire_wait.count, 1);
    assert_true(sa.acquire_wait.sum_us < 200000 * (uint64_t)th_slack());
    assert_int_equal(sb.acquisitions, 1);
    assert_int_equal(sb.waits, 1);
    assert_int_equal(sb.wakeups, 1);
    assert_int_equal(sb.wakeups_taken, 0);
    assert_int_equal(sb.acquire_wait.count, 1);
    assert_true(sb.acquire_wait.sum_us >= 250000);
    assert_int_equal(sb.acquire_wait.bucket[bucket_of(sb.acquire_wait.sum_us)], 1);
    assert_int_equal(sb.handoff_gap.count, 1);
    assert_true(sb.handoff_gap.sum_us < 250000 * (uint64_t)th_slack());
    for (int i = 0; i < 2; i++) {
        const dlock_stats *s = i ? &sb : &sa;
        assert_true(s->connects >= 1);
        assert_true(s->roundtrips >= 2);
        assert_int_equal(s->roundtrip.count, s->roundtrips);
        assert_int_equal(bucket_sum(&s->roundtrip), s->roundtrip.count);
        assert_int_equal(bucket_sum(&s->acquire_wait), s->acquire_wait.count);
        assert_int_equal(s->reconnects, 0);
    }
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

typedef struct acquirer {
    dlock_lock *l;
    int rc;
    pthread_t t;
} acquirer;

static void *acquire_main(void *arg)
{
    acquirer *q = arg;
    q->rc = dlock_lock_try(q->l, 20000, 5000);
    return NULL;
}

static long long numsub(const char *ch)
{
    redisReply *r = th_cmd(&srv, "PUBSUB NUMSUB %s", ch);
    long long n = r && r->elements == 2 ? r->element[1]->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* An unlock message while the lock is still held: the waiter uses the
 * wake-up, finds the lock taken, and counts it. */
static void test_wakeup_that_finds_it_taken(void **state)
{
    (void)state;
    dlock_client *a = th_client(&srv, 0), *b = th_client(&srv, 0);
    char name[128], ch[200];
    th_name(name, sizeof(name), "stats-taken");
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    dlock_lock *la, *lb;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(a, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(a, name, owner, &la), DLOCK_OK);
    assert_int_equal(dlock_client_new_owner_id(b, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(b, name, owner, &lb), DLOCK_OK);   /* released here */
    assert_int_equal(dlock_lock_acquire(la, 20000), DLOCK_OK);
    acquirer q = {lb, -1, 0};
    pthread_create(&q.t, NULL, acquire_main, &q);
    int64_t until = th_now_ms() + 5000 * th_slack();
    while (numsub(ch) != 1 && th_now_ms() < until)
        th_sleep_ms(5);
    assert_int_equal(numsub(ch), 1);
    th_sleep_ms(50);   /* its retry after subscribing is done */
    freeReplyObject(th_cmd(&srv, "PUBLISH %s 0", ch));
    until = th_now_ms() + 5000 * th_slack();
    while (stats(b).wakeups_taken < 1 && th_now_ms() < until)
        th_sleep_ms(5);
    dlock_stats sb = stats(b);
    assert_int_equal(sb.wakeups, 1);
    assert_int_equal(sb.wakeups_taken, 1);
    assert_int_equal(sb.acquisitions, 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    pthread_join(q.t, NULL);
    assert_int_equal(q.rc, DLOCK_OK);
    sb = stats(b);
    assert_int_equal(sb.wakeups, 2);
    assert_int_equal(sb.wakeups_taken, 1);
    assert_int_equal(sb.acquisitions, 1);
    assert_int_equal(sb.waits, 1);
    assert_int_equal(sb.handoff_gap.count, 1);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* Three watchdog holds for ~1 s (timeout 300 ms): renewed in batches, so
 * about three renewals per round trip; then one key deleted behind the
 * holder's back: lost, reason "gone". */
static void test_renewals_and_lost(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 300 * th_slack());
    char names[3][128];
    dlock_lock *l[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_get(c, th_name(names[i], sizeof(names[i]), "stats-wd"), &l[i]),
                         DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    th_sleep_ms(1000 * th_slack());
    dlock_stats s = stats(c);
    print_message("    renewals %llu in %llu round trips\n", (unsigned long long)s.renewals,
                  (unsigned long long)s.renewal_roundtrips);
    assert_true(s.renewal_roundtrips >= 3);
    assert_true(s.renewals >= 3 * 3);
    assert_true(s.renewals >= 2 * s.renewal_roundtrips);   /* batched, not one by one */
    /* One server: each pass's batch goes in a write of its own. */
    assert_true(s.renewal_writes >= 3);
    assert_true(s.renewal_writes <= s.renewal_roundtrips);
    assert_int_equal(s.lost[DLOCK_LOST_GONE], 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", names[0]));
    int64_t until = th_now_ms() + 3000 * th_slack();
    while (stats(c).lost[DLOCK_LOST_GONE] < 1 && th_now_ms() < until)
        th_sleep_ms(10);
    s = stats(c);
    assert_int_equal(s.lost[DLOCK_LOST_GONE], 1);
    assert_int_equal(s.lost[DLOCK_LOST_UNREACHABLE], 0);
    assert_int_equal(s.lost[DLOCK_LOST_PAUSED], 0);
    assert_int_equal(dlock_lock_release(l[0]), DLOCK_ENOTOWNER);
    for (int i = 1; i < 3; i++)
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
}

/* A latch await acquires nothing: it counts as a wait, not an acquisition;
 * a semaphore's permits count. */
static void test_latch_and_semaphore(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 0);
    char name[128];
    dlock_latch *l;
    assert_int_equal(dlock_latch_get(c, th_name(name, sizeof(name), "stats-latch"), &l), DLOCK_OK);
    assert_int_equal(dlock_latch_try_set_count(l, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_latch_await(l, 100), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    assert_int_equal(dlock_latch_await(l, 100), DLOCK_OK);
    dlock_latch_free(l);
    dlock_stats s = stats(c);
    assert_int_equal(s.acquisitions, 0);
    assert_int_equal(s.waits, 1);
    dlock_semaphore *sem;
    assert_int_equal(dlock_semaphore_get(c, th_name(name, sizeof(name), "stats-sem"), &sem),
                     DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(sem, 2), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(sem, 2), DLOCK_OK);
    dlock_semaphore_free(sem);
    s = stats(c);
    assert_int_equal(s.acquisitions, 1);
    dlock_client_close(c);
}

/* The server restarts: the connections found dead are replaced, counted. */
static void test_reconnects(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 0);
    assert_int_equal(dlock_client_ping(c), DLOCK_OK);
    dlock_stats s0 = stats(c);
    assert_int_equal(s0.reconnects, 0);
    assert_int_equal(th_redis_restart(&srv), 0);
    assert_int_equal(dlock_client_ping(c), DLOCK_OK);
    dlock_stats s1 = stats(c);
    assert_true(s1.reconnects >= 1);
    assert_true(s1.connects > s0.connects);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_scheme),
        cmocka_unit_test(test_bad_arguments_and_size),
        cmocka_unit_test(test_acquire_wait_and_handoff),
        cmocka_unit_test(test_wakeup_that_finds_it_taken),
        cmocka_unit_test(test_renewals_and_lost),
        cmocka_unit_test(test_latch_and_semaphore),
        cmocka_unit_test(test_reconnects),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
