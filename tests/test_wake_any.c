/* A waiter wakes however the lock was freed (issue 39): a holder that died
 * leaves its lock for its TTL, and an operator's DEL, a FLUSHALL or an
 * eviction frees it without the unlock message a release publishes. The
 * waiter still gets it within 100 ms (x the slack), not at the old TTL
 * (30 s here), for the lock, the fair lock, the read and the write lock; and
 * a waiter kept out by a lost holder's lock-delay gets it as soon as that
 * holder says it stopped. */
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
#include "sync/sync.h"

#define DEAD_TTL 30000   /* the dead holder's lock lives this long */

typedef int (*lock_getter)(dlock_client *, const char *, dlock_lock **);

typedef struct waiter {
    pthread_t t;
    dlock_lock *l;
    int rc;
    int64_t done_at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try(w->l, DEAD_TTL * 2, 10000);
    w->done_at = th_now_ms();
    if (w->rc == DLOCK_OK)
        dlock_lock_release(w->l);
    return NULL;
}

/* Keys the server tracks for clients (INFO stats). */
static long long tracked_keys(th_redis *r)
{
    redisReply *rep = th_cmd(r, "INFO stats");
    const char *p = rep && rep->str ? strstr(rep->str, "tracking_total_keys:") : NULL;
    long long n = p ? atoll(p + 20) : -1;
    freeReplyObject(rep);
    return n;
}

/* A waiter on `name` through c (its getter's type), asleep with its key
 * watched: once the server tracks a key. */
static void start_waiter(waiter *w, th_redis *r, dlock_client *c, lock_getter get,
                         const char *name)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(get(c, name, &w->l), DLOCK_OK);
    long long before = tracked_keys(r);
    pthread_create(&w->t, NULL, waiter_main, w);
    int64_t until = th_now_ms() + 5000 * th_slack();
    while (tracked_keys(r) <= before && th_now_ms() < until)
        th_sleep_ms(2);
    if (tracked_keys(r) <= before)
        fail_msg("the waiter's key was never tracked");
    th_sleep_ms(20);   /* the attempt that found it held is answered */
}

/* Joins w, which must have got the lock within 100 ms x the slack of t0. */
static void woken_in_time(waiter *w, int64_t t0, const char *what)
{
    pthread_join(w->t, NULL);
    if (w->rc != DLOCK_OK)
        fail_msg("%s: the waiter ended %s (%s)", what, dlock_errname(w->rc), dlock_last_error());
    int64_t took = w->done_at - t0, bound = 100 * th_slack();
    print_message("    %s: acquired %lld ms after the lock was freed\n", what, (long long)took);
    if (took > bound)
        fail_msg("%s: acquired %lld ms after the lock was freed (bound %lld ms)", what,
                 (long long)took, (long long)bound);
    dlock_lock_free(w->l);
}

/* A dead holder's lock in Redisson's layout (no dlock client behind it). */
static void dead_holder(th_redis *r, const char *name, int write)
{
    if (write)
        assert_int_equal(th_int(r, "HSET %s mode write dead-uuid:1:write 1", name), 2);
    else
        assert_int_equal(th_int(r, "HSET %s dead-uuid:1 1", name), 1);
    assert_int_equal(th_int(r, "PEXPIRE %s %d", name, DEAD_TTL), 1);
}

static void deleted(lock_getter get, int write, const char *prefix, const char *what)
{
    char name[96];
    th_name(name, sizeof(name), prefix);
    dead_holder(&srv, name, write);
    waiter w;
    start_waiter(&w, &srv, cli, get, name);
    int64_t t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    woken_in_time(&w, t0, what);
}

static void test_del_lock(void **state)
{
    (void)state;
    deleted(dlock_lock_get, 0, "wa-lock", "lock, DEL");
}

static void test_del_fair(void **state)
{
    (void)state;
    deleted(dlock_fair_lock_get, 0, "wa-fair", "fair lock, DEL");
}

static void test_del_read(void **state)
{
    (void)state;
    deleted(dlock_read_lock_get, 1, "wa-read", "read lock after a writer, DEL");
}

static void test_del_write(void **state)
{
    (void)state;
    deleted(dlock_write_lock_get, 1, "wa-write", "write lock after a writer, DEL");
}

/* FLUSHALL: Redis tells every tracking client "everything changed". */
static void test_flushall(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* one server: a deployment's FLUSHALL is per node */
    char name[96];
    th_name(name, sizeof(name), "wa-flush");
    dead_holder(&srv, name, 0);
    waiter w;
    start_waiter(&w, &srv, cli, dlock_lock_get, name);
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&srv, "FLUSHALL"));
    woken_in_time(&w, t0, "lock, FLUSHALL");
}

/* Evicted (allkeys-lru, maxmemory cut to 1 byte for a moment). */
static void test_evicted(void **state)
{
    (void)state;
    if (th_deployed(&srv) || th_tls_mode() || th_acl_mode())
        skip();   /* a server of its own, plain */
    th_redis r;
    assert_int_equal(th_redis_start(&r, "--maxmemory-policy", "allkeys-lru", NULL), 0);
    dlock_client *c = th_client(&r, 0);
    assert_non_null(c);
    dead_holder(&r, "wa:evicted", 0);
    waiter w;
    start_waiter(&w, &r, c, dlock_lock_get, "wa:evicted");
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory 1"));
    /* Each write evicts (a loaded server's eviction may stop at its time
     * limit and go on at the next command). */
    for (int i = 0; i < 100 && th_int(&r, "EXISTS wa:evicted") != 0; i++)
        freeReplyObject(th_cmd(&r, "SET wa:filler x"));
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory 0"));
    assert_int_equal(th_int(&r, "EXISTS wa:evicted"), 0);
    woken_in_time(&w, t0, "lock, evicted");
    assert_true(dlock__pubsub_keywatch_wakes(c->pubsub) >= 1);
    dlock_client_close(c);
    th_redis_destroy(&r);
}

/* A waiter kept out by a lost holder's lock-delay: woken when the holder's
 * release (DLOCK_ENOTOWNER: it knows it lost the lock) ends the delay. */
static void test_delay_ended(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_lock_delay(cfg, DEAD_TTL), DLOCK_OK);
    dlock_client *hc;
    assert_int_equal(dlock_client_open(&hc, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[96];
    th_name(name, sizeof(name), "wa-delay");
    dlock_lock *h;
    assert_int_equal(dlock_lock_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* lost */
    waiter w;
    start_waiter(&w, &srv, cli, dlock_lock_get, name);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(h), DLOCK_ENOTOWNER);
    woken_in_time(&w, t0, "lock, lost holder's delay ended");
    dlock_lock_free(h);
    dlock_client_close(hc);
}

/* Waiters on a lock whose holder renews it are not woken by the renewals
 * (a key still there wakes nobody): they retry only when it is freed. */
static void test_renewals_wake_nobody(void **state)
{
    (void)state;
    const int64_t wd = 300 * th_slack();
    dlock_client *hc = th_client(&srv, wd);
    char name[96];
    th_name(name, sizeof(name), "wa-renew");
    dlock_lock *h;
    assert_int_equal(dlock_lock_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    waiter w;
    memset(&w, 0, sizeof(w));
    assert_int_equal(dlock_lock_get(cli, name, &w.l), DLOCK_OK);
    uint64_t a0 = dlock__pubsub_keywatch_wakes(cli->pubsub);
    pthread_create(&w.t, NULL, waiter_main, &w);
    assert_true(th_await_lock_waiter(cli, name));
    th_sleep_ms(4 * wd);   /* about twelve renewals */
    assert_int_equal(dlock__pubsub_keywatch_wakes(cli->pubsub), a0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    woken_in_time(&w, t0, "lock, released after renewals");
    dlock_lock_free(h);
    dlock_client_close(hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_del_lock),
        cmocka_unit_test(test_del_fair),
        cmocka_unit_test(test_del_read),
        cmocka_unit_test(test_del_write),
        cmocka_unit_test(test_delay_ended),
        cmocka_unit_test(test_renewals_wake_nobody),
        cmocka_unit_test(test_evicted),
        cmocka_unit_test(test_flushall),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
