/* The non-reentrant locks (Redisson 4.4's getNonReentrantLock and
 * RedissonNonReentrantFairLock): the holder's own acquisition, blocking or
 * asynchronous, with any wait, is refused at once with DLOCK_EREENTRY and
 * writes nothing; other owners wait on pub/sub and get it at the release;
 * a release by a non-owner is DLOCK_ENOTOWNER; the watchdog and leases work
 * as the reentrant lock's; the fair one keeps arrival order; a holder on
 * Redisson's side (played with Redis commands in its layout) and a dlock
 * waiter take turns, and the other way round. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"

typedef int (*getter)(dlock_client *, const char *, dlock_lock **);
typedef int (*getter_as)(dlock_client *, const char *, const char *, dlock_lock **);

static void refused_reentry(int rc, const char *what)
{
    if (rc != DLOCK_EREENTRY || !strstr(dlock_last_error(), "non-reentrant"))
        fail_msg("%s by the holder: %s (%s), expected DLOCK_EREENTRY", what, dlock_errname(rc),
                 dlock_last_error());
}

/* ---------------------------------------------------- one async call */

typedef struct arec {
    pthread_mutex_t mu;
    int done, status;
    char msg[512];
} arec;

static void on_done(const dlock_async_result *res, void *ud)
{
    arec *r = ud;
    pthread_mutex_lock(&r->mu);
    r->status = dlock_async_status(res);
    snprintf(r->msg, sizeof(r->msg), "%s", dlock_async_message(res));
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
}

static int async_acquire(dlock_lock *l, int64_t wait_ms, char *msg, size_t size)
{
    arec r = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    assert_int_equal(dlock_lock_acquire_async(l, &(dlock_wait_opts){.wait_ms = wait_ms},
                                              on_done, &r),
                     DLOCK_OK);
    int64_t until = th_now_ms() + 10000 * th_slack();
    for (;;) {
        pthread_mutex_lock(&r.mu);
        int done = r.done;
        pthread_mutex_unlock(&r.mu);
        if (done || th_now_ms() > until)
            break;
        th_sleep_ms(2);
    }
    assert_true(r.done);
    snprintf(msg, size, "%s", r.msg);
    return r.status;
}

/* ------------------------------------------------------------- reentry */

/* The holder's every kind of acquisition is refused at once and writes
 * nothing: the hold count stays 1, the TTL is not set again. */
static void reentry_refused(getter get, getter_as get_as, const char *prefix)
{
    char name[96], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), prefix);
    dlock_lock *l, *la;
    assert_int_equal(get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(get_as(cli, name, owner, &la), DLOCK_OK);
    const int64_t lease = 20000;
    assert_int_equal(dlock_lock_try(l, 0, lease), DLOCK_OK);
    th_sleep_ms(300);   /* a refused reentry must not set the TTL back to the lease */
    int64_t t0 = th_now_ms();
    refused_reentry(dlock_lock_try(l, 0, lease), "try(0)");
    refused_reentry(dlock_lock_try(l, 5000, lease), "try(5 s)");
    refused_reentry(dlock_lock_acquire(l, DLOCK_WATCHDOG), "acquire");
    assert_true(th_now_ms() - t0 < 1000 * th_slack());   /* at once, no wait */
    int64_t count = 0;
    assert_int_equal(dlock_lock_hold_count(l, &count), DLOCK_OK);
    assert_int_equal(count, 1);
    assert_true(th_int(&srv, "PTTL %s", name) <= lease - 250);
    /* Asynchronously, through an explicit owner's handle. */
    assert_int_equal(dlock_lock_try(la, 0, lease), DLOCK_ETIMEDOUT);   /* held by l */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    char msg[512];
    assert_int_equal(async_acquire(la, 0, msg, sizeof(msg)), DLOCK_OK);
    int rc = async_acquire(la, DLOCK_WAIT_FOREVER, msg, sizeof(msg));
    if (rc != DLOCK_EREENTRY || !strstr(msg, "non-reentrant"))
        fail_msg("asynchronous reentry: %s (%s)", dlock_errname(rc), msg);
    assert_int_equal(th_int(&srv, "HINCRBY %s %s 0", name, owner), 1);   /* still 1 */
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(dlock_lock_release(la), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_lock_free(la);
}

static void test_reentry_refused(void **state)
{
    (void)state;
    reentry_refused(dlock_nonreentrant_lock_get, dlock_nonreentrant_lock_get_as, "nr");
}

static void test_fair_reentry_refused(void **state)
{
    (void)state;
    reentry_refused(dlock_nonreentrant_fair_lock_get, dlock_nonreentrant_fair_lock_get_as,
                    "nrf");
}

/* ------------------------------------------------------------- waiting */

typedef struct waiter {
    pthread_t t;
    dlock_lock *l;
    int rc;
    int64_t at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try(w->l, 30000 * th_slack(), DLOCK_WATCHDOG);
    w->at = th_now_ms();
    if (w->rc == DLOCK_OK) {
        th_sleep_ms(20);
        dlock_lock_release(w->l);
    }
    return NULL;
}

/* Another owner waits, woken by the release (not at the 30 s TTL); a
 * release by a non-owner is refused; the watchdog renews the hold. */
static void test_other_owner_waits(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 600 * slack;
    dlock_client *hc = th_client(&srv, wd);
    char name[96];
    th_name(name, sizeof(name), "nr-wait");
    dlock_lock *h, *other;
    assert_int_equal(dlock_nonreentrant_lock_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_nonreentrant_lock_get(cli, name, &other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_ENOTOWNER);
    waiter w = {.l = other};
    pthread_create(&w.t, NULL, waiter_main, &w);
    assert_true(th_await_lock_waiter(cli, name));
    th_sleep_ms(3 * wd);   /* renewed meanwhile */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.at - t0 < 1000 * slack);
    dlock_lock_free(h);
    dlock_lock_free(other);
    dlock_client_close(hc);
}

/* The fair one: waiters get it in arrival order. */
static void test_fair_order(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "nrf-order");
    dlock_lock *h;
    assert_int_equal(dlock_nonreentrant_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    enum { N = 3 };
    waiter w[N];
    for (int i = 0; i < N; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        assert_int_equal(dlock_nonreentrant_fair_lock_get(cli, name, &w[i].l), DLOCK_OK);
        pthread_create(&w[i].t, NULL, waiter_main, &w[i]);
        int64_t until = th_now_ms() + 5000 * th_slack();
        while (th_int(&srv, "LLEN redisson_lock_queue:{%s}", name) < i + 1 &&
               th_now_ms() < until)
            th_sleep_ms(5);
        assert_int_equal(th_int(&srv, "LLEN redisson_lock_queue:{%s}", name), i + 1);
    }
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        assert_int_equal(w[i].rc, DLOCK_OK);
        if (i > 0)
            assert_true(w[i].at >= w[i - 1].at);
        dlock_lock_free(w[i].l);
    }
    dlock_lock_free(h);
}

/* ------------------------------------------------------- Redisson's side */

/* A holder on Redisson's side (its layout: the hash, its owner's field at
 * 1, a TTL; its release: DEL and "0" on the lock's channel): the dlock
 * waiter gets it at the release. The other way round: dlock's hold is a
 * hash Redisson's acquisition sees held (its PTTL), and dlock's release
 * publishes the "0" Redisson's waiters wake on. */
static void test_redisson_side(void **state)
{
    (void)state;
    char name[96], ch[160];
    th_name(name, sizeof(name), "nr-redisson");
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    assert_int_equal(th_int(&srv, "HSET %s java-uuid:7 1", name), 1);
    assert_int_equal(th_int(&srv, "PEXPIRE %s 30000", name), 1);
    dlock_lock *l;
    assert_int_equal(dlock_nonreentrant_lock_get(cli, name, &l), DLOCK_OK);
    waiter w = {.l = l};
    pthread_create(&w.t, NULL, waiter_main, &w);
    assert_true(th_await_lock_waiter(cli, name));
    int64_t t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    th_publish(&srv, ch, "0");
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.at - t0 < 1000 * th_slack());

    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);   /* one field: the holder, at 1 */
    assert_true(th_int(&srv, "PTTL %s", name) > 0);      /* what Redisson's try answers */
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    redisReply *m = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
    assert_true(m && m->type == REDIS_REPLY_ARRAY && m->elements == 3);
    assert_string_equal(m->element[2]->str, "0");
    freeReplyObject(m);
    redisFree(sub);
    dlock_lock_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentry_refused),
        cmocka_unit_test(test_fair_reentry_refused),
        cmocka_unit_test(test_other_owner_waits),
        cmocka_unit_test(test_fair_order),
        cmocka_unit_test(test_redisson_side),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
