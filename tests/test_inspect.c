/* Inspection: a lock's snapshot (holders, counts, TTL, token, waiters, a fair
 * queue, a reserved turn, a read-write lock's mode and roles) and the SCAN
 * walk that lists locks, Redisson's included, skipping what is not a lock. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

static void *wait_for(void *arg)
{
    dlock_lock *l = arg;
    if (dlock_lock_try(l, 10000, 1000) == DLOCK_OK)
        dlock_lock_release(l);
    return NULL;
}

static void test_snapshot(void **state)
{
    (void)state;
    char name[128], me[DLOCK_OWNER_BUFSIZE];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, th_name(name, sizeof(name), "snap"), &l), DLOCK_OK);
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
    assert_string_equal(dlock_info_name(info), name);
    assert_int_equal(dlock_info_locked(info), 0);
    assert_int_equal(dlock_info_holders(info), 0);
    assert_int_equal(dlock_info_ttl(info), -2);
    assert_int_equal(dlock_info_token(info), 0);
    assert_int_equal(dlock_info_waiters(info), 0);
    assert_null(dlock_info_owner(info, 0));
    dlock_info_free(info);

    uint64_t tok;
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 20000, .token = &tok}), DLOCK_OK);
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 20000, .token = &tok}), DLOCK_OK);
    pthread_t t;
    pthread_create(&t, NULL, wait_for, l);
    int64_t until = th_now_ms() + 3000 * th_slack();
    int64_t waiters = 0;
    while (waiters < 1 && th_now_ms() < until) {
        assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
        waiters = dlock_info_waiters(info);
        if (waiters < 1)
            dlock_info_free(info);
    }
    assert_int_equal(waiters, 1);
    assert_int_equal(dlock_info_locked(info), 1);
    assert_int_equal(dlock_info_holders(info), 1);
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    assert_string_equal(dlock_info_owner(info, 0), me);
    assert_int_equal(dlock_info_hold_count(info, 0), 2);
    assert_true(dlock_info_ttl(info) > 15000 && dlock_info_ttl(info) <= 20000);
    assert_int_equal(dlock_info_token(info), tok);
    dlock_info_free(info);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    pthread_join(t, NULL);
    dlock_lock_free(l);
}

static void test_snapshot_of_redisson_hold_and_bad_keys(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, th_name(name, sizeof(name), "java"), &l), DLOCK_OK);
    assert_int_equal(th_cli(&srv, "HSET", name, "0b5e63c4-7bb7-4ac3-a2a6-2a9d2a5cfb61:88", "3", NULL), 0);
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
    assert_string_equal(dlock_info_owner(info, 0), "0b5e63c4-7bb7-4ac3-a2a6-2a9d2a5cfb61:88");
    assert_int_equal(dlock_info_hold_count(info, 0), 3);
    assert_int_equal(dlock_info_ttl(info), -1);
    dlock_info_free(info);
    /* Not locks: a string, a hash of other things. */
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "SET %s v", name));
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_EWRONGTYPE);
    assert_null(info);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "HSET %s color blue", name));
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "not a lock"));
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    assert_int_equal(dlock_lock_inspect(NULL, &info), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_inspect(l, NULL), DLOCK_EINVAL);
    dlock_info_free(NULL);
    dlock_lock_free(l);
}

typedef struct seen {
    int n;
    int stop_at;
    int bad;
    char prefix[64];
} seen;

static int on_lock(const dlock_info *info, void *ud)
{
    seen *s = ud;
    if (strncmp(dlock_info_name(info), s->prefix, strlen(s->prefix)) != 0 ||
        dlock_info_holders(info) != 1 || dlock_info_hold_count(info, 0) < 1)
        s->bad++;
    s->n++;
    return s->stop_at && s->n >= s->stop_at;
}

static void test_scan_lists_locks_only(void **state)
{
    (void)state;
    enum { N = 300 };
    dlock_lock *ls[N];
    char name[128];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "scan:lock:%03d", i);
        assert_int_equal(dlock_lock_get(cli, name, &ls[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(ls[i], 60000), DLOCK_OK);
    }
    /* Look-alikes that are not locks, and a Redisson hold. */
    freeReplyObject(th_cmd(&srv, "SET scan:lock:str x"));
    freeReplyObject(th_cmd(&srv, "HSET scan:lock:hash a b"));
    freeReplyObject(th_cmd(&srv, "RPUSH scan:lock:list a"));
    assert_int_equal(th_cli(&srv, "HSET", "scan:lock:java", "5d0f7c7e-3d43-4a9c-9a1e-0f4b6c8a2e11:1", "1", NULL), 0);
    freeReplyObject(th_cmd(&srv, "HSET other:lock x:1 1"));   /* outside the pattern */

    seen s = {0, 0, 0, "scan:lock:"};
    assert_int_equal(dlock_client_scan(cli, "scan:lock:*", on_lock, &s), DLOCK_OK);
    assert_int_equal(s.n, N + 1);
    assert_int_equal(s.bad, 0);

    seen all = {0, 0, 0, ""};
    assert_int_equal(dlock_client_scan(cli, NULL, on_lock, &all), DLOCK_OK);
    assert_true(all.n >= N + 2);

    seen first = {0, 5, 0, "scan:lock:"};
    assert_int_equal(dlock_client_scan(cli, "scan:lock:*", on_lock, &first), DLOCK_OK);
    assert_int_equal(first.n, 5);
    assert_int_equal(dlock_client_scan(cli, "*", NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_scan(NULL, "*", on_lock, &s), DLOCK_EINVAL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_lock_release(ls[i]), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
}

static int count_one(const dlock_info *info, void *ud)
{
    (void)info;
    (*(int *)ud)++;
    return 0;
}

static void *await_latch(void *arg)
{
    dlock_latch_await(arg, 10000);
    return NULL;
}

typedef struct counts_seen {
    int permits, counts, other;
    int64_t sem_count;
} counts_seen;

static int on_count(const dlock_info *info, void *ud)
{
    counts_seen *cs = ud;
    if (dlock_info_kind(info) == DLOCK_KIND_PERMITS) {
        cs->permits++;
        cs->sem_count = dlock_info_count(info);
    } else if (dlock_info_kind(info) == DLOCK_KIND_COUNT) {
        cs->counts++;
    } else {
        cs->other++;
    }
    return 0;
}

/* Semaphores and latches: a permit semaphore's available count and its
 * permits with their leases (an expired one counted back as available, not
 * listed), a latch's count and awaiters; the count listing skips the
 * family's own counters and strings that are not whole numbers. */
static void test_snapshot_of_counts(void **state)
{
    (void)state;
    dlock_permit_semaphore *p;
    char ida[DLOCK_PERMIT_ID_BUFSIZE], idb[DLOCK_PERMIT_ID_BUFSIZE], idc[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_get(cli, "cnt:sem", &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 4, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, ida, sizeof(ida)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 60000, idb, sizeof(idb)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 100, idc, sizeof(idc)), DLOCK_OK);
    th_sleep_ms(300);   /* idc's lease runs out; nobody has given it back yet */
    dlock_info *info = NULL;
    assert_int_equal(dlock_client_inspect(cli, "cnt:sem", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_PERMITS);
    assert_int_equal(dlock_info_count(info), 2);   /* 1 free + the expired one */
    assert_int_equal(dlock_info_holders(info), 2);
    int a = strcmp(dlock_info_owner(info, 0), ida) == 0 ? 0 : 1;
    assert_string_equal(dlock_info_owner(info, a), ida);
    assert_string_equal(dlock_info_owner(info, 1 - a), idb);
    assert_true(dlock_info_holder_ttl(info, a) > 0 && dlock_info_holder_ttl(info, a) <= 30000);
    assert_true(dlock_info_holder_ttl(info, 1 - a) > 30000);
    assert_int_equal(dlock_info_holder_ttl(info, 2), -2);
    assert_int_equal(dlock_info_waiters(info), 0);
    assert_int_equal(dlock_info_latch_waiters(info), -1);
    dlock_info_free(info);
    /* Read-only: the expired permit is still in the leases set. */
    assert_int_equal(th_int(&srv, "ZCARD {cnt:sem}:timeout"), 3);
    int64_t avail, held;
    assert_int_equal(dlock_permit_semaphore_available(p, &avail, &held), DLOCK_OK);
    assert_int_equal(avail, 2);
    assert_int_equal(held, 2);

    dlock_latch *l;
    assert_int_equal(dlock_latch_get(cli, "cnt:latch", &l), DLOCK_OK);
    assert_int_equal(dlock_latch_try_set_count(l, 3, NULL), DLOCK_OK);
    dlock_client *other = th_client(&srv, 0);
    dlock_latch *l2;
    assert_int_equal(dlock_latch_get(other, "cnt:latch", &l2), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, await_latch, l2), 0);
    int64_t deadline = th_now_ms() + 5000 * th_slack();
    int64_t lw = -1;
    while (th_now_ms() < deadline) {
        assert_int_equal(dlock_client_inspect(cli, "cnt:latch", &info), DLOCK_OK);
        assert_int_equal(dlock_info_kind(info), DLOCK_KIND_COUNT);
        assert_int_equal(dlock_info_count(info), 3);
        assert_int_equal(dlock_info_holders(info), 0);
        assert_int_equal(dlock_info_waiters(info), 0);
        lw = dlock_info_latch_waiters(info);
        dlock_info_free(info);
        if (lw == 1)
            break;
        th_sleep_ms(20);
    }
    assert_int_equal(lw, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(dlock_client_inspect(cli, "cnt:latch", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_NONE);
    dlock_info_free(info);

    /* Not counts: a string of letters, a list, a hash that is not a lock are
     * other data, with their Redis type and TTL; a lock is a lock. */
    freeReplyObject(th_cmd(&srv, "SET cnt:str abc PX 600000"));
    freeReplyObject(th_cmd(&srv, "RPUSH cnt:list a b"));
    freeReplyObject(th_cmd(&srv, "HSET cnt:hash color blue"));
    const char *others[][2] = {{"cnt:str", "string"}, {"cnt:list", "list"}, {"cnt:hash", "hash"}};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(dlock_client_inspect(cli, others[i][0], &info), DLOCK_OK);
        assert_int_equal(dlock_info_kind(info), DLOCK_KIND_OTHER);
        assert_string_equal(dlock_info_redis_type(info), others[i][1]);
        assert_string_equal(dlock_info_name(info), others[i][0]);
        assert_int_equal(dlock_info_holders(info), 0);
        assert_int_equal(dlock_info_locked(info), 0);
        if (i == 0)
            assert_true(dlock_info_ttl(info) > 0 && dlock_info_ttl(info) <= 600000);
        else
            assert_int_equal(dlock_info_ttl(info), -1);
        dlock_info_free(info);
    }
    /* Every kind names its Redis type; a lock handle still refuses other data. */
    assert_int_equal(dlock_client_inspect(cli, "cnt:sem", &info), DLOCK_OK);
    assert_string_equal(dlock_info_redis_type(info), "string");
    dlock_info_free(info);
    assert_int_equal(dlock_client_inspect(cli, "cnt:none", &info), DLOCK_OK);
    assert_string_equal(dlock_info_redis_type(info), "none");
    dlock_info_free(info);
    assert_string_equal(dlock_info_redis_type(NULL), "");
    dlock_lock *on_str;
    assert_int_equal(dlock_lock_get(cli, "cnt:list", &on_str), DLOCK_OK);
    assert_int_equal(dlock_lock_inspect(on_str, &info), DLOCK_EWRONGTYPE);
    assert_null(info);
    assert_non_null(strstr(dlock_last_error(), "holds a list, not a lock"));
    dlock_lock_free(on_str);
    assert_int_equal(dlock_client_inspect(cli, "", &info), DLOCK_EINVAL);
    dlock_lock *lk;
    assert_int_equal(dlock_lock_get(cli, "cnt:lock", &lk), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lk, 60000), DLOCK_OK);
    assert_int_equal(dlock_client_inspect(cli, "cnt:lock", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_LOCK);
    assert_int_equal(dlock_info_holders(info), 1);
    dlock_info_free(info);
    /* A lock handle on a count: refused, as before. */
    dlock_lock *on_sem;
    assert_int_equal(dlock_lock_get(cli, "cnt:sem", &on_sem), DLOCK_OK);
    assert_int_equal(dlock_lock_inspect(on_sem, &info), DLOCK_EWRONGTYPE);
    dlock_lock_free(on_sem);

    /* The listing: the semaphore and a plain count; not the lock's fencing
     * token counter, nor the string of letters. */
    freeReplyObject(th_cmd(&srv, "SET cnt:plain 7"));
    freeReplyObject(th_cmd(&srv, "SET redisson_lock_token:{cnt:lock} 5"));
    freeReplyObject(th_cmd(&srv, "SET redisson_unlock_latch:{cnt:lock}:x 1"));
    counts_seen cs = {0, 0, 0, 0};
    assert_int_equal(dlock_client_scan_counts(cli, "*cnt:*", on_count, &cs), DLOCK_OK);
    assert_int_equal(cs.permits, 1);
    assert_int_equal(cs.sem_count, 2);
    assert_int_equal(cs.counts, 1);
    assert_int_equal(cs.other, 0);
    assert_int_equal(dlock_client_scan_counts(cli, "*", NULL, NULL), DLOCK_EINVAL);

    assert_int_equal(dlock_lock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    assert_int_equal(dlock_permit_semaphore_release(p, ida), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(p, idb), DLOCK_OK);
    dlock_permit_semaphore_free(p);
    dlock_latch_free(l);
    dlock_latch_free(l2);
    dlock_client_close(other);
}

typedef struct walked {
    int locks, counts, bad;
} walked;

static int on_walk(const dlock_info *info, void *ud)
{
    walked *w = ud;
    dlock_kind k = dlock_info_kind(info);
    const char *n = dlock_info_name(info);
    if (strncmp(n, "walk:", 5) != 0)
        w->bad++;   /* an auxiliary counter, or outside the pattern */
    else if (k == DLOCK_KIND_LOCK && strncmp(n, "walk:lock:", 10) == 0 && dlock_info_locked(info))
        w->locks++;
    else if (k == DLOCK_KIND_COUNT && strncmp(n, "walk:sem:", 9) == 0)
        w->counts++;
    else
        w->bad++;
    return 0;
}

/* One walk over every kind: the held locks and the counts of a scan and a
 * scan of counts, with each key visited by one SCAN instead of two, and
 * the SCAN's COUNT the caller's. */
static void test_walk_every_kind(void **state)
{
    (void)state;
    enum { NL = 40, NC = 20 };
    dlock_lock *ls[NL];
    char name[64];
    for (int i = 0; i < NL; i++) {
        snprintf(name, sizeof(name), "walk:lock:%02d", i);
        assert_int_equal(dlock_lock_get(cli, name, &ls[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(ls[i], 60000), DLOCK_OK);
    }
    for (int i = 0; i < NC; i++)
        freeReplyObject(th_cmd(&srv, "SET walk:sem:%02d %d", i, i + 1));
    freeReplyObject(th_cmd(&srv, "SET walk:str abc"));
    freeReplyObject(th_cmd(&srv, "RPUSH walk:list a"));
    freeReplyObject(th_cmd(&srv, "HSET walk:hash color blue"));
    freeReplyObject(th_cmd(&srv, "SET redisson_lock_token:{walk:lock:00} 5"));

    walked two = {0, 0, 0};
    long long s0 = th_calls(&srv, "scan");
    assert_int_equal(dlock_client_scan(cli, "*walk:*", on_walk, &two), DLOCK_OK);
    assert_int_equal(dlock_client_scan_counts(cli, "*walk:*", on_walk, &two), DLOCK_OK);
    long long s1 = th_calls(&srv, "scan");
    walked one = {0, 0, 0};
    assert_int_equal(dlock_client_walk(cli, "*walk:*", DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS,
                                       100000, on_walk, &one),
                     DLOCK_OK);
    long long s2 = th_calls(&srv, "scan");
    assert_int_equal(two.locks, NL);
    assert_int_equal(two.counts, NC);
    assert_int_equal(two.bad, 0);
    assert_int_equal(one.locks, NL);
    assert_int_equal(one.counts, NC);
    assert_int_equal(one.bad, 0);
    assert_true(s1 - s0 >= 2);      /* the two calls walk twice */
    assert_int_equal(s2 - s1, 1);   /* the walk, with a COUNT above the keys: once */

    /* A small COUNT: more round trips, the same objects. */
    walked small = {0, 0, 0};
    assert_int_equal(dlock_client_walk(cli, "walk:*", DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS, 5,
                                       on_walk, &small),
                     DLOCK_OK);
    assert_true(th_calls(&srv, "scan") - s2 > 2);
    assert_int_equal(small.locks, NL);
    assert_int_equal(small.counts, NC);
    /* One kind alone: what its own call reports. */
    walked counts = {0, 0, 0};
    assert_int_equal(dlock_client_walk(cli, "*walk:*", DLOCK_WALK_COUNTS, 0, on_walk, &counts),
                     DLOCK_OK);
    assert_int_equal(counts.locks, 0);
    assert_int_equal(counts.counts, NC);
    assert_int_equal(counts.bad, 0);

    assert_int_equal(dlock_client_walk(cli, "*", 0, 0, on_walk, &one), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "kinds"));
    assert_int_equal(dlock_client_walk(cli, "*", 8, 0, on_walk, &one), DLOCK_EINVAL);
    assert_int_equal(dlock_client_walk(cli, "*", DLOCK_WALK_LOCKS, -1, on_walk, &one),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "count"));
    assert_int_equal(dlock_client_walk(cli, "*", DLOCK_WALK_LOCKS, 100001, on_walk, &one),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_walk(cli, "*", DLOCK_WALK_LOCKS, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_walk(NULL, "*", DLOCK_WALK_LOCKS, 0, on_walk, &one),
                     DLOCK_EINVAL);
    for (int i = 0; i < NL; i++) {
        assert_int_equal(dlock_lock_release(ls[i]), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
}

/* A fair lock's queue, in order, with each waiter's deadline; the waiters
 * count them (each fair waiter listens on a channel of its own). */
static void test_snapshot_of_fair_queue(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "snapfair");
    dlock_lock *h, *w;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, 20000), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli, name, "waiter-a:1", &w), DLOCK_OK);
    pthread_t t;
    pthread_create(&t, NULL, wait_for, w);
    /* a Redisson waiter behind it, deadline an hour away */
    for (int i = 0; i < 200 && th_int(&srv, "LLEN redisson_lock_queue:{%s}", name) < 1; i++)
        th_sleep_ms(10);
    freeReplyObject(th_cmd(&srv, "RPUSH redisson_lock_queue:{%s} rid:5", name));
    redisReply *r = th_cmd(&srv, "TIME");
    long long now = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "ZADD redisson_lock_timeout:{%s} %lld rid:5", name,
                           now + 3600000));
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(h, &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_LOCK);
    assert_null(dlock_info_mode(info));
    assert_int_equal(dlock_info_queued(info), 2);
    assert_string_equal(dlock_info_queued_owner(info, 0), "waiter-a:1");
    assert_string_equal(dlock_info_queued_owner(info, 1), "rid:5");
    assert_null(dlock_info_queued_owner(info, 2));
    /* the dlock waiter's slot is its wait (10 s), after the holder's 20 s TTL */
    assert_true(dlock_info_queued_deadline(info, 0) > 25000);
    assert_true(dlock_info_queued_deadline(info, 0) <= 30000);
    assert_true(dlock_info_queued_deadline(info, 1) > 3500000);
    assert_true(dlock_info_waiters(info) >= 2);
    dlock_info_free(info);
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    pthread_join(t, NULL);
    freeReplyObject(th_cmd(&srv, "DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}",
                           name, name));
    dlock_lock_free(w);
    dlock_lock_free(h);
}

/* A reserved next turn, and read-write locks in Redisson's layout: mode,
 * readers, the writer (shown without ":write"); a hash with a bad mode is not a
 * lock; SCAN lists read-write locks too. */
static void test_snapshot_of_turns_and_rwlocks(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "snapturn");
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "HSET %s other:1 1", name));
    freeReplyObject(th_cmd(&srv, "SET dlock_lock_next:{%s} waiter:7 PX 30000", name));
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
    assert_string_equal(dlock_info_next_turn(info), "waiter:7");
    assert_true(dlock_info_next_turn_ttl(info) > 20000);
    assert_int_equal(dlock_info_holder_writes(info, 0), 0);
    dlock_info_free(info);
    freeReplyObject(th_cmd(&srv, "DEL %s dlock_lock_next:{%s}", name, name));
    dlock_lock_free(l);

    th_name(name, sizeof(name), "snaprw");
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "HSET %s mode write w:1:write 2 w:1 1", name));
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RWLOCK);
    assert_string_equal(dlock_info_mode(info), "write");
    assert_int_equal(dlock_info_holders(info), 2);
    int writer = dlock_info_holder_writes(info, 0) ? 0 : 1;
    assert_string_equal(dlock_info_owner(info, writer), "w:1");
    assert_int_equal(dlock_info_hold_count(info, writer), 2);
    assert_string_equal(dlock_info_owner(info, 1 - writer), "w:1");
    assert_int_equal(dlock_info_holder_writes(info, 1 - writer), 0);
    dlock_info_free(info);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "HSET %s mode read r:1 1 r:2 3", name));
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
    assert_string_equal(dlock_info_mode(info), "read");
    assert_int_equal(dlock_info_holders(info), 2);
    dlock_info_free(info);
    int n = 0;
    assert_int_equal(dlock_client_scan(cli, name, count_one, &n), DLOCK_OK);
    assert_int_equal(n, 1);
    freeReplyObject(th_cmd(&srv, "HSET %s mode sideways", name));
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_EWRONGTYPE);
    assert_null(info);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "HSET %s w:1:write 1", name));   /* a writer without a mode */
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_EWRONGTYPE);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_lock_free(l);
}

/* A holder in a walk: the bounded lock's counts as the walk gave them. */
typedef struct bounded_seen {
    size_t holders, total;
    int found;
} bounded_seen;

static int on_bounded(const dlock_info *info, void *ud)
{
    bounded_seen *b = ud;
    if (strcmp(dlock_info_name(info), "bnd:lock") == 0) {
        b->holders = dlock_info_holders(info);
        b->total = dlock_info_holders_total(info);
        b->found = 1;
    }
    return 0;
}

/* dlock_config_set_inspect_limit: a name with more holders than the limit
 * reads that many and counts them all (a lock, a read-write lock keeping its
 * mode, a permit semaphore with the leases that ran out counted back, a
 * fair queue read up to the limit); one under the limit reads whole, and
 * the walks likewise; a hash whose own last field looks like the limit's
 * mark is not read as a lock for that. */
static void test_bounded_snapshot(void **state)
{
    (void)state;
    static const char fill[] = "for i = 1, tonumber(ARGV[1]) do redis.call('hset', KEYS[1], "
                               "'6f1c0d4e-1111-2222-3333-444455556666:' .. i, 1) end";
    freeReplyObject(th_cmd(&srv, "EVAL %s 1 %s %s", fill, "bnd:lock", "50"));
    freeReplyObject(th_cmd(&srv, "EVAL %s 1 %s %s", fill, "bnd:small", "5"));
    freeReplyObject(th_cmd(&srv, "EVAL %s 1 %s %s", fill, "bnd:rw", "50"));
    freeReplyObject(th_cmd(&srv, "HSET bnd:rw mode read"));
    freeReplyObject(th_cmd(&srv, "EVAL %s 1 %s", "for i = 1, 30 do redis.call('rpush', "
                           "KEYS[1], 'q:' .. i) end", "redisson_lock_queue:{bnd:lock}"));
    /* 3 free permits, 50 held (leases far ahead), 5 whose leases ran out. */
    freeReplyObject(th_cmd(&srv, "EVAL %s 2 %s %s", "redis.call('set', KEYS[1], 3) for i = 1, "
                           "55 do redis.call('zadd', KEYS[2], i <= 50 and 9999999999999 or 1, "
                           "'permit-' .. i) end", "bnd:sem", "{bnd:sem}:timeout"));
    freeReplyObject(th_cmd(&srv, "HSET bnd:fake 6f1c0d4e-1111-2222-3333-444455556666:1 1 "
                           "#total 99"));

    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_inspect_limit(cfg, 10000001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_inspect_limit(cfg, 10), DLOCK_OK);
    dlock_client *lim = NULL;
    assert_int_equal(dlock_client_open(&lim, cfg), DLOCK_OK);
    dlock_config_free(cfg);

    dlock_info *info;
    assert_int_equal(dlock_client_inspect(lim, "bnd:lock", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_LOCK);
    assert_int_equal(dlock_info_holders(info), 10);
    assert_int_equal(dlock_info_holders_total(info), 50);
    assert_int_equal(dlock_info_queued(info), 10);
    for (size_t i = 0; i < 10; i++)
        assert_non_null(strstr(dlock_info_owner(info, i), "6f1c0d4e-1111-2222-3333-444455556666:"));
    dlock_info_free(info);
    assert_int_equal(dlock_client_inspect(cli, "bnd:lock", &info), DLOCK_OK);   /* no limit */
    assert_int_equal(dlock_info_holders(info), 50);
    assert_int_equal(dlock_info_holders_total(info), 50);
    assert_int_equal(dlock_info_queued(info), 30);
    dlock_info_free(info);

    assert_int_equal(dlock_client_inspect(lim, "bnd:rw", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RWLOCK);
    assert_string_equal(dlock_info_mode(info), "read");
    assert_int_equal(dlock_info_holders(info), 10);
    assert_int_equal(dlock_info_holders_total(info), 50);
    dlock_info_free(info);

    assert_int_equal(dlock_client_inspect(lim, "bnd:sem", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_PERMITS);
    assert_int_equal(dlock_info_holders(info), 10);
    assert_int_equal(dlock_info_holders_total(info), 50);
    assert_int_equal(dlock_info_count(info), 8);   /* 3 free and 5 run out */
    assert_true(dlock_info_holder_ttl(info, 0) > 0);
    dlock_info_free(info);
    assert_int_equal(dlock_client_inspect(cli, "bnd:sem", &info), DLOCK_OK);
    assert_int_equal(dlock_info_holders(info), 50);
    assert_int_equal(dlock_info_holders_total(info), 50);
    assert_int_equal(dlock_info_count(info), 8);
    dlock_info_free(info);

    assert_int_equal(dlock_client_inspect(lim, "bnd:small", &info), DLOCK_OK);
    assert_int_equal(dlock_info_holders(info), 5);
    assert_int_equal(dlock_info_holders_total(info), 5);
    dlock_info_free(info);

    assert_int_equal(dlock_client_inspect(lim, "bnd:fake", &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_OTHER);   /* "#total" = "99": a field */
    dlock_info_free(info);

    bounded_seen b = {0, 0, 0};
    assert_int_equal(dlock_client_walk(lim, "bnd:*", DLOCK_WALK_LOCKS, 0, on_bounded, &b),
                     DLOCK_OK);
    assert_int_equal(b.found, 1);
    assert_int_equal(b.holders, 10);
    assert_int_equal(b.total, 50);
    dlock_client_close(lim);
    freeReplyObject(th_cmd(&srv, "DEL bnd:lock bnd:small bnd:rw redisson_lock_queue:{bnd:lock} "
                           "bnd:fake"));
    freeReplyObject(th_cmd(&srv, "DEL bnd:sem {bnd:sem}:timeout"));
}

typedef struct counted {
    int notes;
} counted;

static int on_note_count(const dlock_info *info, void *ud)
{
    ((counted *)ud)->notes += strstr(dlock_info_name(info), "dlock_note") != NULL;
    return 0;
}

/* A holder's note: written beside the lock ({name}:dlock_note:<owner>, or
 * name:dlock_note:<owner> for a name with a '{') with its TTL, read back,
 * deleted; a note holding a number is no count to the walks; bad arguments
 * refused. */
static void test_notes(void **state)
{
    (void)state;
    static const char owner[] = "6f1c0d4e-1111-2222-3333-444455556666:7";
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(dlock_client_note(cli, "nt:lock", owner, &text, &len), DLOCK_OK);
    assert_null(text);   /* none yet */
    assert_int_equal(dlock_client_set_note(cli, "nt:lock", owner, "make all", 8, 5000), DLOCK_OK);
    redisReply *r = th_cmd(&srv, "GET {nt:lock}:dlock_note:%s", owner);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "make all");
    freeReplyObject(r);
    long long ttl = th_int(&srv, "PTTL {nt:lock}:dlock_note:%s", owner);
    assert_true(ttl > 0 && ttl <= 5000);
    assert_int_equal(dlock_client_note(cli, "nt:lock", owner, &text, &len), DLOCK_OK);
    assert_string_equal(text, "make all");
    assert_int_equal(len, 8);
    free(text);
    /* A name with a brace: Redisson's suffix form. */
    assert_int_equal(dlock_client_set_note(cli, "nt:{x}", "permit-id", "42", 2, 5000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS nt:{x}:dlock_note:permit-id"), 1);
    counted c = {0};
    assert_int_equal(dlock_client_scan_counts(cli, "*nt*", on_note_count, &c), DLOCK_OK);
    assert_int_equal(c.notes, 0);   /* "42" is a note, not a count */
    /* Deleted. */
    assert_int_equal(dlock_client_set_note(cli, "nt:lock", owner, NULL, 0, 0), DLOCK_OK);
    assert_int_equal(dlock_client_note(cli, "nt:lock", owner, &text, NULL), DLOCK_OK);
    assert_null(text);
    assert_int_equal(dlock_client_set_note(cli, "nt:{x}", "permit-id", NULL, 0, 0), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS nt:{x}:dlock_note:permit-id"), 0);
    /* Bad arguments: nothing written. */
    char big[DLOCK_NOTE_MAX + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(dlock_client_set_note(cli, "nt:lock", owner, big, sizeof(big), 5000),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_note(cli, "nt:lock", owner, "a", 1, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_note(cli, "nt:lock", "", "a", 1, 5000), DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_note(cli, "", owner, "a", 1, 5000), DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_note(NULL, "nt:lock", owner, "a", 1, 5000), DLOCK_EINVAL);
    assert_int_equal(dlock_client_note(cli, "nt:lock", owner, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(th_int(&srv, "EXISTS {nt:lock}:dlock_note:%s", owner), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_snapshot_of_fair_queue),
        cmocka_unit_test(test_snapshot_of_turns_and_rwlocks),
        cmocka_unit_test(test_snapshot_of_redisson_hold_and_bad_keys),
        cmocka_unit_test(test_scan_lists_locks_only),
        cmocka_unit_test(test_snapshot_of_counts),
        cmocka_unit_test(test_walk_every_kind),
        cmocka_unit_test(test_bounded_snapshot),
        cmocka_unit_test(test_notes),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
