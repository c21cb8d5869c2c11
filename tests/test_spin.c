/* The spin lock (Redisson's getSpinLock): the reentrant lock's layout and
 * hold counts, shared with a pub/sub lock handle of the same name; its
 * waiters subscribe to nothing (no channel on the server, no pub/sub
 * connection), try again on the back-off (its attempts counted on the
 * server), get the lock one back-off step after a release that publishes
 * nothing (Redisson's spin unlock), end at a cancellation or the client's
 * close without waiting for their step, blocking and asynchronous; a bad
 * back-off is refused naming its field. */
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
#include "sync/sync.h"

/* Pub/sub connections the server has (CLIENT LIST TYPE pubsub): lines. */
static long long pubsub_clients(void)
{
    redisReply *r = th_cmd(&srv, "CLIENT LIST TYPE pubsub");
    if (!r)
        return -1;
    long long n = 0;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        for (const char *p = r->str; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
            if (*p)
                n++;
    freeReplyObject(r);
    return n;
}

static void basic(const char *prefix)
{
    char name[96];
    th_name(name, sizeof(name), prefix);
    dlock_lock *s, *plain;
    assert_int_equal(dlock_spin_lock_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli, name, "other-owner:1", &plain), DLOCK_OK);
    assert_int_equal(dlock_lock_try(s, 0, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(s, 0, DLOCK_WATCHDOG), DLOCK_OK);   /* reentrant */
    int64_t count = 0;
    assert_int_equal(dlock_lock_hold_count(s, &count), DLOCK_OK);
    assert_int_equal(count, 2);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);   /* RLock's layout: one field */
    assert_int_equal(dlock_lock_try(plain, 0, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(plain), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_release(s), DLOCK_OK);
    assert_int_equal(dlock_lock_release(s), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_try(plain, 0, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(s, 0, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(plain), DLOCK_OK);
    dlock_lock_free(s);
    dlock_lock_free(plain);
}

static void test_basic(void **state)
{
    (void)state;
    basic("spin");
}

/* ------------------------------------------------- waiters, no channels */

typedef struct waiter {
    pthread_t t;
    dlock_lock *l;
    int64_t wait;
    int rc;
    int64_t at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try(w->l, w->wait, DLOCK_WATCHDOG);
    w->at = th_now_ms();
    if (w->rc == DLOCK_OK)
        dlock_lock_release(w->l);
    return NULL;
}

typedef struct arec {
    pthread_mutex_t mu;
    int done, status;
    int64_t at;
} arec;

static void on_done(const dlock_async_result *res, void *ud)
{
    arec *r = ud;
    pthread_mutex_lock(&r->mu);
    r->status = dlock_async_status(res);
    r->at = th_now_ms();
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
}

static int arec_done(arec *r)
{
    pthread_mutex_lock(&r->mu);
    int d = r->done;
    pthread_mutex_unlock(&r->mu);
    return d;
}

/* Blocking and asynchronous waiters on many names held by another client:
 * no channel is subscribed on the server and no pub/sub connection opened
 * while they wait; each gets its lock once released. */
static void test_waiters_subscribe_nothing(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    enum { NB = 4, NA = 40 };
    dlock_client *hc = th_client(&srv, 0);
    dlock_client *wc = th_client(&srv, 0);
    assert_non_null(hc);
    assert_non_null(wc);
    dlock_lock *held[NB + NA], *mine[NB + NA];
    for (int i = 0; i < NB + NA; i++) {
        char name[96];
        th_name(name, sizeof(name), "spin-many");
        assert_int_equal(dlock_spin_lock_get(hc, name, &held[i]), DLOCK_OK);
        char owner[DLOCK_OWNER_BUFSIZE];   /* an asynchronous call needs an explicit owner */
        assert_int_equal(dlock_client_new_owner_id(wc, owner, sizeof(owner)), DLOCK_OK);
        assert_int_equal(dlock_spin_lock_get_as(wc, name, owner, &mine[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_try(held[i], 0, DLOCK_WATCHDOG), DLOCK_OK);
    }
    /* The holders' own (the watchdog's revocation by tracking subscribes to
     * invalidations): what the waiters must not add to. Counted once it is
     * set up (every hold tracked) and the counts hold still. */
    int64_t settle_by = th_now_ms() + 5000 * slack;
    while (dlock__watchdog_tracking(hc->wd) != 2 && th_now_ms() < settle_by)
        th_sleep_ms(5);
    long long pubsub_before = pubsub_clients(), channels_before = th_channels(&srv, "*");
    for (;;) {
        th_sleep_ms(200);
        long long p = pubsub_clients(), c = th_channels(&srv, "*");
        if ((p == pubsub_before && c == channels_before) || th_now_ms() >= settle_by)
            break;
        pubsub_before = p;
        channels_before = c;
    }
    waiter w[NB];
    for (int i = 0; i < NB; i++) {
        w[i] = (waiter){.l = mine[i], .wait = 30000 * slack};
        pthread_create(&w[i].t, NULL, waiter_main, &w[i]);
    }
    arec r[NA];
    for (int i = 0; i < NA; i++) {
        r[i] = (arec){PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
        assert_int_equal(dlock_lock_acquire_async(mine[NB + i],
                                                  &(dlock_wait_opts){.wait_ms = 30000 * slack},
                                                  on_done, &r[i]),
                         DLOCK_OK);
    }
    /* Waiting: attempts keep coming (the back-off at its 128 ms maximum). */
    long long calls0 = th_calls(&srv, "evalsha");
    th_sleep_ms(600);
    assert_true(th_calls(&srv, "evalsha") > calls0);
    assert_int_equal(th_channels(&srv, "*"), channels_before);
    assert_int_equal(th_channels(&srv, "*spin-many*"), 0);
    assert_int_equal(pubsub_clients(), pubsub_before);
    for (int i = 0; i < NA; i++)
        assert_false(arec_done(&r[i]));
    for (int i = 0; i < NB + NA; i++)
        assert_int_equal(dlock_lock_release(held[i]), DLOCK_OK);
    for (int i = 0; i < NB; i++) {
        pthread_join(w[i].t, NULL);
        assert_int_equal(w[i].rc, DLOCK_OK);
    }
    int64_t until = th_now_ms() + 10000 * slack;
    for (int i = 0; i < NA; i++) {
        while (!arec_done(&r[i]) && th_now_ms() < until)
            th_sleep_ms(5);
        assert_true(arec_done(&r[i]));
        assert_int_equal(r[i].status, DLOCK_OK);
        int64_t n = 0;
        assert_int_equal(dlock_lock_hold_count(mine[NB + i], &n), DLOCK_OK);
        assert_int_equal(n, 1);
        assert_int_equal(dlock_lock_release(mine[NB + i]), DLOCK_OK);
    }
    for (int i = 0; i < NB + NA; i++) {
        dlock_lock_free(held[i]);
        dlock_lock_free(mine[i]);
    }
    dlock_client_close(wc);
    dlock_client_close(hc);
}

/* ------------------------------------------------------------ back-off */

/* A constant back-off of 100 ms: a waiter of about one second makes about
 * ten attempts (the server counts them), and gets the lock within a step of
 * a release that publishes nothing (Redisson's spin unlock: DEL alone). */
static void test_backoff(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    char name[96];
    th_name(name, sizeof(name), "spin-backoff");
    assert_int_equal(th_int(&srv, "HSET %s java-uuid:7 1", name), 1);   /* Redisson's holder */
    assert_int_equal(th_int(&srv, "PEXPIRE %s 60000", name), 1);
    dlock_lock *s;
    assert_int_equal(dlock_spin_lock_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_set_backoff(s, &(dlock_backoff){100, 100, 1}), DLOCK_OK);
    long long calls0 = th_calls(&srv, "evalsha");
    waiter w = {.l = s, .wait = 30000 * slack};
    int64_t t0 = th_now_ms();
    pthread_create(&w.t, NULL, waiter_main, &w);
    th_sleep_ms(1000);
    int64_t t1 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* no message */
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    long long attempts = th_calls(&srv, "evalsha") - calls0 - 1;   /* less the release */
    /* One attempt per 100 ms at most, beside the first two (the one that
     * found it busy, the one after joining the waiters) and the last; a
     * loaded machine makes fewer. */
    long long most = (w.at - t0) / 100 + 3;
    if (attempts < 3 || attempts > most)
        fail_msg("%lld attempts in %lld ms with a 100 ms back-off", attempts,
                 (long long)(w.at - t0));
    assert_true(w.at - t1 < 100 + 400 * slack);
    dlock_lock_free(s);
}

/* Redisson's default back-off (1 ms doubling to 128 ms): over 1.5 s about
 * 8 steps to the maximum and then one attempt per 128 ms. */
static void test_default_backoff(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    char name[96];
    th_name(name, sizeof(name), "spin-default");
    dlock_lock *h, *s;
    assert_int_equal(dlock_lock_get_as(cli, name, "holder:1", &h), DLOCK_OK);
    assert_int_equal(dlock_spin_lock_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_try(h, 0, 60000), DLOCK_OK);
    long long calls0 = th_calls(&srv, "evalsha");
    waiter w = {.l = s, .wait = 1500};
    pthread_create(&w.t, NULL, waiter_main, &w);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_ETIMEDOUT);
    long long attempts = th_calls(&srv, "evalsha") - calls0;
    if (attempts < 5 || attempts > 30)
        fail_msg("%lld attempts in 1.5 s with Redisson's default back-off", attempts);
    (void)slack;
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(s);
}

/* ------------------------------------------------- cancellation, close */

typedef struct cwait {
    waiter *w;
    dlock_cancel *tok;
} cwait;

static void *cancelled_main(void *arg)
{
    cwait *c = arg;
    c->w->rc = dlock_lock_acquire_opts(
        c->w->l, &(dlock_wait_opts){.wait_ms = c->w->wait, .cancel = c->tok});
    c->w->at = th_now_ms();
    return NULL;
}

/* A step of a minute is cut short by a cancellation and by the client's
 * close, blocking and asynchronous. */
static void test_cancel_and_close(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    char name[96];
    th_name(name, sizeof(name), "spin-cancel");
    dlock_lock *h, *s;
    assert_int_equal(dlock_lock_get_as(cli, name, "holder:1", &h), DLOCK_OK);
    assert_int_equal(dlock_lock_try(h, 0, 120000), DLOCK_OK);
    dlock_client *wc = th_client(&srv, 0);
    assert_non_null(wc);
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(wc, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_spin_lock_get_as(wc, name, owner, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_set_backoff(s, &(dlock_backoff){60000, 60000, 1}), DLOCK_OK);
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);

    arec r = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
    assert_int_equal(dlock_lock_acquire_async(
                         s, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .cancel = tok},
                         on_done, &r),
                     DLOCK_OK);
    th_sleep_ms(200);
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(tok);
    while (!arec_done(&r) && th_now_ms() - t0 < 10000 * slack)
        th_sleep_ms(2);
    assert_true(arec_done(&r));
    assert_int_equal(r.status, DLOCK_ECANCELED);
    assert_true(r.at - t0 < 1000 * slack);

    /* Blocking: the cancellation ends it too. */
    dlock_cancel_reset(tok);
    waiter w = {.l = s, .wait = DLOCK_WAIT_FOREVER};
    pthread_t t;
    pthread_create(&t, NULL, cancelled_main, &(cwait){&w, tok});
    th_sleep_ms(200);
    t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.at - t0 < 1000 * slack);

    /* The client's close ends a pending asynchronous wait (DLOCK_ECLOSED)
     * before it returns, though its step has most of a minute to go. */
    arec r2 = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
    assert_int_equal(dlock_lock_acquire_async(
                         s, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, on_done, &r2),
                     DLOCK_OK);
    th_sleep_ms(200);
    t0 = th_now_ms();
    dlock_client_close(wc);
    dlock_lock_free(s);
    assert_true(arec_done(&r2));
    assert_int_equal(r2.status, DLOCK_ECLOSED);
    assert_true(r2.at - t0 < 5000 * slack);
    dlock_cancel_free(tok);
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    dlock_lock_free(h);
}

/* ----------------------------------------------------------- bad input */

static void refused(int rc, const char *word)
{
    if (rc != DLOCK_EINVAL || !strstr(dlock_last_error(), word))
        fail_msg("expected DLOCK_EINVAL naming '%s': %s (%s)", word, dlock_errname(rc),
                 dlock_last_error());
}

static void test_bad_backoff(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "spin-bad");
    dlock_lock *s, *plain;
    assert_int_equal(dlock_spin_lock_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &plain), DLOCK_OK);
    refused(dlock_lock_set_backoff(plain, NULL), "not a spin lock");
    refused(dlock_lock_set_backoff(s, &(dlock_backoff){0, 128, 2}), "initial_ms");
    refused(dlock_lock_set_backoff(s, &(dlock_backoff){10, 5, 2}), "max_ms");
    refused(dlock_lock_set_backoff(s, &(dlock_backoff){1, 7200000, 2}), "max_ms");
    refused(dlock_lock_set_backoff(s, &(dlock_backoff){1, 128, 0}), "multiplier");
    refused(dlock_lock_set_backoff(NULL, NULL), "NULL");
    dlock_lock *none;
    refused(dlock_spin_lock_get_as(cli, name, NULL, &none), "owner");
    assert_null(none);
    assert_int_equal(dlock_lock_set_backoff(s, NULL), DLOCK_OK);   /* Redisson's default */
    /* The refused calls changed nothing: it still works. */
    assert_int_equal(dlock_lock_try(s, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(s), DLOCK_OK);
    dlock_lock_free(s);
    dlock_lock_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_waiters_subscribe_nothing),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_default_backoff),
        cmocka_unit_test(test_cancel_and_close),
        cmocka_unit_test(test_bad_backoff),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
