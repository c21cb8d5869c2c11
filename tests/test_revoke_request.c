/* Revocation on request (dlock_lock_set_revoke_handler,
 * dlock_lock_request_revoke): a waiter or an operator asks the holder to let
 * go; the holder's handler hears it and releases or refuses; nothing is
 * forced. On one server, and on a cluster (test_revoke_request_cluster:
 * DLOCK_TEST_DEPLOY=cluster, the channel sharded in the lock's slot). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"

/* What a handler heard. */
typedef struct heard {
    pthread_mutex_t mu;
    int calls;
    char name[256], owner[DLOCK_OWNER_BUFSIZE], note[256];
    int64_t at_ms;
    dlock_lock *release;     /* released in the handler when set (explicit owner) */
    int release_rc;
} heard;

#define HEARD_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

static void on_revoke(const char *name, const char *owner, const char *note, void *ud)
{
    heard *h = ud;
    int rc = h->release ? dlock_lock_release(h->release) : 0;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    snprintf(h->name, sizeof(h->name), "%s", name);
    snprintf(h->owner, sizeof(h->owner), "%s", owner);
    snprintf(h->note, sizeof(h->note), "%s", note);
    h->at_ms = th_now_ms();
    h->release_rc = rc;
    pthread_mutex_unlock(&h->mu);
}

static int calls(heard *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->calls;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* Waits up to ms x th_slack() for h to have heard n requests. */
static int await_calls(heard *h, int n, int64_t ms)
{
    int64_t until = th_now_ms() + ms * th_slack();
    while (calls(h) < n && th_now_ms() < until)
        th_sleep_ms(5);
    return calls(h) >= n;
}

static char chan_buf[300];
static const char *channel_of(const char *name)
{
    snprintf(chan_buf, sizeof(chan_buf), "dlock_revoke_request__channel:{%s}", name);
    return chan_buf;
}

/* Waits until `n` connections listen for requests on name. */
static int await_listeners(const char *name, long long n)
{
    int64_t until = th_now_ms() + 5000 * th_slack();
    while (th_numsub(&srv, channel_of(name)) < n && th_now_ms() < until)
        th_sleep_ms(10);
    return th_numsub(&srv, channel_of(name)) >= n;
}

/* Waits until nobody listens for requests on name. */
static int await_listeners_gone(const char *name)
{
    int64_t until = th_now_ms() + 5000 * th_slack();
    while (th_numsub(&srv, channel_of(name)) != 0 && th_now_ms() < until)
        th_sleep_ms(10);
    return th_numsub(&srv, channel_of(name)) == 0;
}

static dlock_lock *handle_as(dlock_client *c, const char *name, char id[DLOCK_OWNER_BUFSIZE])
{
    assert_int_equal(dlock_client_new_owner_id(c, id, DLOCK_OWNER_BUFSIZE), DLOCK_OK);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get_as(c, name, id, &l), DLOCK_OK);
    return l;
}

/* A holder that refuses: its handler hears the name, its owner and the
 * note, and the lock stays held by it (the request changes nothing). */
static void test_holder_refuses(void **state)
{
    (void)state;
    char name[128], id[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rq-refuse");
    dlock_client *ch = th_client(&srv, 0), *ca = th_client(&srv, 0);
    dlock_lock *lh = handle_as(ch, name, id), *la = NULL;
    assert_int_equal(dlock_lock_get(ca, name, &la), DLOCK_OK);
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_set_revoke_handler(lh, on_revoke, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(await_listeners(name, 1));

    dlock_revoke_answer ans = {-1, -1};
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_request_revoke(la, "please, deploy at 15:00", &ans), DLOCK_OK);
    assert_int_equal(ans.holders, 1);
    assert_int_equal(ans.listeners, 1);
    assert_true(await_calls(&h, 1, 2000));
    assert_string_equal(h.name, name);
    assert_string_equal(h.owner, id);
    assert_string_equal(h.note, "please, deploy at 15:00");
    assert_true(h.at_ms - t0 < 1000 * th_slack());
    /* refused: still held by the holder, the asker does not get in */
    assert_int_equal(dlock_lock_try(la, 300, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    int held = 0;
    assert_int_equal(dlock_lock_is_held(lh, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(calls(&h), 1);   /* once per request */
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    dlock_lock_free(lh);
    dlock_lock_free(la);
    dlock_client_close(ch);
    dlock_client_close(ca);
}

/* A holder that releases in its handler lets the asker's waiter in: the
 * waiter, already waiting, asks, and gets the lock soon after. */
typedef struct waiter_arg {
    dlock_lock *l;
    int rc;
    int64_t got_ms;
} waiter_arg;

static void *waiter_main(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_lock_try(w->l, 10000 * th_slack(), DLOCK_WATCHDOG);
    w->got_ms = th_now_ms();
    if (w->rc == DLOCK_OK)
        dlock_lock_release(w->l);
    return NULL;
}

static void test_holder_releases_waiter_gets_in(void **state)
{
    (void)state;
    char name[128], id[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rq-release");
    dlock_client *ch = th_client(&srv, 0), *ca = th_client(&srv, 0);
    dlock_lock *lh = handle_as(ch, name, id), *la = NULL;
    assert_int_equal(dlock_lock_get(ca, name, &la), DLOCK_OK);
    heard h = HEARD_INIT;
    h.release = lh;
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_set_revoke_handler(lh, on_revoke, &h), DLOCK_OK);
    assert_true(await_listeners(name, 1));

    waiter_arg w = {.l = la};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    assert_true(th_await_lock_waiter(ca, name));
    dlock_lock *ask = NULL;
    assert_int_equal(dlock_lock_get(ca, name, &ask), DLOCK_OK);
    dlock_revoke_answer ans;
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_request_revoke(ask, NULL, &ans), DLOCK_OK);
    assert_int_equal(ans.holders, 1);
    assert_int_equal(ans.listeners, 1);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(await_calls(&h, 1, 2000));   /* its fields written (and seen) under mu */
    assert_int_equal(h.release_rc, DLOCK_OK);
    assert_string_equal(h.note, "");
    /* in by the unlock message, not by the 30 s lease */
    assert_true(w.got_ms - t0 < 1000 * th_slack());
    dlock_lock_free(ask);
    dlock_lock_free(lh);
    dlock_lock_free(la);
    dlock_client_close(ch);
    dlock_client_close(ca);
}

/* A holder without a handler: the request reaches nobody (listeners 0); a
 * handle of the same name with a handler that does not hold hears nothing
 * (it is counted as a listener, its handler not called). */
static void test_nobody_listening(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rq-nobody");
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_revoke_answer ans;
    assert_int_equal(dlock_lock_request_revoke(l, "x", &ans), DLOCK_OK);
    assert_int_equal(ans.holders, 1);
    assert_int_equal(ans.listeners, 0);

    dlock_client *other = th_client(&srv, 0);
    dlock_lock *lo = NULL;
    assert_int_equal(dlock_lock_get(other, name, &lo), DLOCK_OK);
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_set_revoke_handler(lo, on_revoke, &h), DLOCK_OK);
    assert_true(await_listeners(name, 1));
    assert_int_equal(dlock_lock_request_revoke(l, "y", &ans), DLOCK_OK);
    assert_int_equal(ans.holders, 1);
    assert_int_equal(ans.listeners, 1);
    th_sleep_ms(300);
    assert_int_equal(calls(&h), 0);   /* not its hold */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(lo);
    dlock_client_close(other);
    dlock_lock_free(l);
}

/* The request to a free lock: holders 0, nothing published, no record. */
static void test_free_lock(void **state)
{
    (void)state;
    char name[128], key[300];
    th_name(name, sizeof(name), "rq-free");
    dlock_lock *l = NULL;
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_set_revoke_handler(l, on_revoke, &h), DLOCK_OK);
    assert_true(await_listeners(name, 1));
    dlock_revoke_answer ans = {-1, -1};
    assert_int_equal(dlock_lock_request_revoke(l, NULL, &ans), DLOCK_OK);
    assert_int_equal(ans.holders, 0);
    assert_int_equal(ans.listeners, 0);
    snprintf(key, sizeof(key), "dlock_revoke_request:{%s}", name);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    /* the handler's handle then takes it: the old request does not reach it */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(calls(&h), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A request made before the holder listened is read from its record when
 * the subscription comes up; the holder is a thread of its client (a
 * thread-owner handle), named as that thread's owner id. */
static void test_record_read_on_subscribe(void **state)
{
    (void)state;
    char name[128], key[300], me[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rq-record");
    dlock_lock *l = NULL, *ask = NULL;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &ask), DLOCK_OK);
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_revoke_answer ans;
    assert_int_equal(dlock_lock_request_revoke(ask, "early", &ans), DLOCK_OK);
    assert_int_equal(ans.listeners, 0);
    snprintf(key, sizeof(key), "dlock_revoke_request:{%s}", name);
    long long ttl = th_int(&srv, "PTTL %s", key);
    assert_true(ttl > 0 && ttl <= 10000);
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_set_revoke_handler(l, on_revoke, &h), DLOCK_OK);
    assert_true(await_calls(&h, 1, 3000));
    assert_string_equal(h.owner, me);
    assert_string_equal(h.note, "early");
    /* once: a new handler on the handle keeps the subscription */
    heard h2 = HEARD_INIT;
    assert_int_equal(dlock_lock_set_revoke_handler(l, on_revoke, &h2), DLOCK_OK);
    assert_int_equal(dlock_lock_request_revoke(ask, "second", &ans), DLOCK_OK);
    assert_int_equal(ans.listeners, 1);
    assert_true(await_calls(&h2, 1, 2000));
    assert_string_equal(h2.note, "second");
    /* no handler: nothing more heard, the subscription gone (the UNSUBSCRIBE
     * goes out from the io thread after the call returns) */
    assert_int_equal(dlock_lock_set_revoke_handler(l, NULL, NULL), DLOCK_OK);
    assert_true(await_listeners_gone(name));
    assert_int_equal(dlock_lock_request_revoke(ask, "third", &ans), DLOCK_OK);
    assert_int_equal(ans.listeners, 0);
    th_sleep_ms(200);
    assert_int_equal(calls(&h), 1);
    assert_int_equal(calls(&h2), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(ask);
}

/* The asynchronous request: flag = held, count = listeners. */
typedef struct async_out {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status, flag;
    int64_t count;
} async_out;

static void on_asked(const dlock_async_result *res, void *ud)
{
    async_out *o = ud;
    pthread_mutex_lock(&o->mu);
    o->status = dlock_async_status(res);
    o->flag = dlock_async_flag(res);
    o->count = dlock_async_count(res);
    o->done = 1;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void async_wait(async_out *o)
{
    pthread_mutex_lock(&o->mu);
    while (!o->done)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
}

static void test_async_request(void **state)
{
    (void)state;
    char name[128], id[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rq-async");
    dlock_lock *l = handle_as(cli, name, id), *ask = NULL;
    assert_int_equal(dlock_lock_get(cli, name, &ask), DLOCK_OK);
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_set_revoke_handler(l, on_revoke, &h), DLOCK_OK);
    assert_true(await_listeners(name, 1));
    async_out o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, -1, -1};
    assert_int_equal(dlock_lock_request_revoke_async(ask, "a", on_asked, &o), DLOCK_OK);
    async_wait(&o);
    assert_int_equal(o.status, DLOCK_OK);
    assert_int_equal(o.flag, 0);   /* free */
    assert_int_equal(o.count, 0);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    o.done = 0;
    assert_int_equal(dlock_lock_request_revoke_async(ask, "b", on_asked, &o), DLOCK_OK);
    async_wait(&o);
    assert_int_equal(o.status, DLOCK_OK);
    assert_int_equal(o.flag, 1);
    assert_int_equal(o.count, 1);   /* on a cluster: SPUBLISH from the async path too */
    assert_true(await_calls(&h, 1, 2000));
    assert_string_equal(h.note, "b");
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);   /* with its handler set: unsubscribes */
    dlock_lock_free(ask);
}

/* A handle whose handler is still set when its client closes, freed after
 * the close (as dlock_client_close allows): the close stops the listener,
 * the free only frees (ASan: nothing leaked, nothing used after free). */
static void test_close_with_handler(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rq-close");
    dlock_client *c = th_client(&srv, 0);
    dlock_lock *l = NULL;
    heard h = HEARD_INIT;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_set_revoke_handler(l, on_revoke, &h), DLOCK_OK);
    assert_true(await_listeners(name, 1));
    dlock_client_close(c);
    dlock_lock_free(l);
    assert_int_equal(calls(&h), 0);
}

/* Bad input: a clear DLOCK_EINVAL with a message, nothing changed. */
static void test_bad_input(void **state)
{
    (void)state;
    dlock_revoke_answer ans = {7, 7};
    assert_int_equal(dlock_lock_request_revoke(NULL, "x", &ans), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lock is NULL"));
    assert_int_equal(ans.holders, 0);
    assert_int_equal(dlock_lock_set_revoke_handler(NULL, on_revoke, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lock is NULL"));
    assert_int_equal(dlock_lock_request_revoke_async(NULL, "x", on_asked, NULL), DLOCK_EINVAL);
    dlock_lock *l = (dlock_lock *)1;
    assert_int_equal(dlock_lock_get(cli, "", &l), DLOCK_EINVAL);
    assert_true(strlen(dlock_last_error()) > 0);
    assert_null(l);
    char name[128];
    th_name(name, sizeof(name), "rq-bad");
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_request_revoke_async(l, "x", NULL, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "callback is NULL"));
    char *big = malloc(DLOCK_REVOKE_NOTE_MAX + 2);
    memset(big, 'n', DLOCK_REVOKE_NOTE_MAX + 1);
    big[DLOCK_REVOKE_NOTE_MAX + 1] = '\0';
    assert_int_equal(dlock_lock_request_revoke(l, big, &ans), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "note"));
    free(big);
    /* a key that is not a lock: refused, left as it is, no record */
    assert_int_equal(th_int(&srv, "LPUSH %s v", name), 1);
    assert_int_equal(dlock_lock_request_revoke(l, NULL, &ans), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "LLEN %s", name), 1);
    char key[300];
    snprintf(key, sizeof(key), "dlock_revoke_request:{%s}", name);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    th_int(&srv, "DEL %s", name);
    dlock_lock_free(l);
}

/* Many names at once: their subscriptions go out together, and on a
 * cluster several of them land on one node in different slots (a sharded
 * SSUBSCRIBE of two slots is refused with CROSSSLOT: before the fix a
 * batch of them never subscribed, and its handlers never heard a thing). */
static void test_many_names_listen(void **state)
{
    (void)state;
    enum { N = 12 };
    dlock_client *c = th_client(&srv, 0);
    char names[N][128];
    dlock_lock *l[N];
    heard h = HEARD_INIT;
    for (int i = 0; i < N; i++) {
        char base[32];
        snprintf(base, sizeof(base), "rq-many-%d", i);
        th_name(names[i], sizeof(names[i]), base);
        assert_int_equal(dlock_lock_get(c, names[i], &l[i]), DLOCK_OK);
    }
    for (int i = 0; i < N; i++)   /* back to back: one sync sends them */
        assert_int_equal(dlock_lock_set_revoke_handler(l[i], on_revoke, &h), DLOCK_OK);
    for (int i = 0; i < N; i++)
        if (!await_listeners(names[i], 1))
            fail_msg("nobody listens for requests on %s", names[i]);
    for (int i = 0; i < N; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_refuses),
        cmocka_unit_test(test_holder_releases_waiter_gets_in),
        cmocka_unit_test(test_nobody_listening),
        cmocka_unit_test(test_free_lock),
        cmocka_unit_test(test_record_read_on_subscribe),
        cmocka_unit_test(test_async_request),
        cmocka_unit_test(test_close_with_handler),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_many_names_listen),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
