/* The count-down latch (Redisson's RCountDownLatch): Redisson's scenarios,
 * awaiters that cost nothing while they wait and all wake at zero (threads,
 * and processes), delete, cancellation, interop both ways with the Redisson
 * side played by plain Redis commands, and bad input. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

/* ------------------------------------------------------------- helpers */

static dlock_latch *latch(const char *prefix, char *name, size_t size)
{
    th_name(name, size, prefix);
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_get(cli, name, &l), DLOCK_OK);
    return l;
}

static int64_t count_of(dlock_latch *l)
{
    int64_t n = -1;
    assert_int_equal(dlock_latch_count(l, &n), DLOCK_OK);
    return n;
}

static void channel_of(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "redisson_countdownlatch__channel__{%s}", name);
}

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

typedef struct awaiter {
    dlock_latch *l;
    int64_t wait_ms;
    dlock_cancel *cancel;
    int rc;
    volatile int done;
    int64_t done_at;
    pthread_t t;
} awaiter;

static void *awaiter_main(void *arg)
{
    awaiter *a = arg;
    a->rc = dlock_latch_await_opts(a->l,
                                   &(dlock_wait_opts){.wait_ms = a->wait_ms, .cancel = a->cancel});
    a->done_at = th_now_ms();
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void start_awaiter(awaiter *a, dlock_latch *l, int64_t wait_ms, dlock_cancel *cancel)
{
    memset(a, 0, sizeof(*a));
    a->l = l;
    a->wait_ms = wait_ms;
    a->cancel = cancel;
    pthread_create(&a->t, NULL, awaiter_main, a);
}

static int is_done(awaiter *a) { return __atomic_load_n(&a->done, __ATOMIC_ACQUIRE); }

/* ------------------------------------------------- Redisson's scenarios */

/* testCountDown / testCount / testTrySetCount: the count as Redis keeps it,
 * gone at zero; a count-down at zero changes nothing. */
static void test_count_down(void **state)
{
    (void)state;
    char name[128];
    dlock_latch *l = latch("latch-count", name, sizeof(name));
    assert_int_equal(count_of(l), 0);
    int set = -1;
    assert_int_equal(dlock_latch_try_set_count(l, 2, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    assert_int_equal(count_of(l), 2);
    assert_int_equal(dlock_latch_try_set_count(l, 3, &set), DLOCK_OK);
    assert_int_equal(set, 0);
    assert_int_equal(count_of(l), 2);
    redisReply *r = th_cmd(&srv, "GET %s", name);
    assert_string_equal(r->str, "2");
    freeReplyObject(r);
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    assert_int_equal(count_of(l), 1);
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    assert_int_equal(count_of(l), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    assert_int_equal(count_of(l), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    /* at zero again: a new count takes */
    assert_int_equal(dlock_latch_try_set_count(l, 1, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    dlock_latch_free(l);
}

/* testAwaitTimeout / testAwaitTimeoutFail */
static void *count_down_later(void *arg)
{
    th_sleep_ms(200);
    dlock_latch_count_down(arg);
    return NULL;
}

static void test_await_timeout(void **state)
{
    (void)state;
    char name[128];
    dlock_latch *l = latch("latch-timeout", name, sizeof(name));
    assert_int_equal(dlock_latch_await(l, 0), DLOCK_OK);   /* at zero: at once */
    assert_int_equal(dlock_latch_try_set_count(l, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_latch_await(l, 0), DLOCK_ETIMEDOUT);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_latch_await(l, 300), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 290 && took < 300 + 1000 * th_slack());
    assert_non_null(strstr(dlock_last_error(), "still counts 1"));
    pthread_t t;
    pthread_create(&t, NULL, count_down_later, l);
    t0 = th_now_ms();
    assert_int_equal(dlock_latch_await(l, 5000 * th_slack()), DLOCK_OK);
    took = th_now_ms() - t0;
    pthread_join(t, NULL);
    assert_true(took >= 150 && took < 200 + 1000 * th_slack());
    dlock_latch_free(l);
}

/* testMultiAwait, and a user's check that awaiting costs nothing: twenty
 * awaiters send no command while they wait, and all wake at zero without
 * another command (the zero message itself ends their waits). */
static void test_many_awaiters(void **state)
{
    (void)state;
    char name[128], ch[200];
    dlock_latch *l = latch("latch-multi", name, sizeof(name));
    channel_of(name, ch, sizeof(ch));
    assert_int_equal(dlock_latch_try_set_count(l, 2, NULL), DLOCK_OK);
    enum { N = 20 };
    awaiter a[N];
    long long g0 = th_calls(&srv, "get");
    for (int i = 0; i < N; i++)
        start_awaiter(&a[i], l, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_numsub(ch, 1, 5000));
    /* every one checked before and after subscribing: then asleep */
    int64_t end = th_now_ms() + 5000 * th_slack();
    while (th_calls(&srv, "get") - g0 < 2 * N && th_now_ms() < end)
        th_sleep_ms(5);
    if (!th_deployed(&srv)) {   /* replicas and sentinels talk to a deployment's nodes */
        long long c0 = th_calls_settled(&srv, 3000);
        th_sleep_ms(700);
        assert_int_equal(th_calls(&srv, NULL) - c0, 0);
    }
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    th_sleep_ms(200);
    for (int i = 0; i < N; i++)
        assert_false(is_done(&a[i]));   /* one left: nobody woken */
    int64_t t0 = th_now_ms();
    long long g1 = th_calls(&srv, "get");
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(a[i].t, NULL);
        assert_int_equal(a[i].rc, DLOCK_OK);
        assert_true(a[i].done_at - t0 < 1000 * th_slack());
    }
    /* the count-down script's own GET, and not one from the awaiters */
    assert_int_equal(th_calls(&srv, "get") - g1, 1);
    assert_true(await_numsub(ch, 0, 5000));
    dlock_latch_free(l);
}

/* testDelete / testDeleteFailed: deleting a counting latch lets dlock's
 * awaiters go (the latch is at zero); deleting none says so. */
static void test_delete(void **state)
{
    (void)state;
    char name[128], ch[200];
    dlock_latch *l = latch("latch-delete", name, sizeof(name));
    channel_of(name, ch, sizeof(ch));
    int deleted = -1;
    assert_int_equal(dlock_latch_delete(l, &deleted), DLOCK_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(dlock_latch_try_set_count(l, 5, NULL), DLOCK_OK);
    awaiter a;
    start_awaiter(&a, l, 10000 * th_slack(), NULL);
    assert_true(await_numsub(ch, 1, 5000));
    th_sleep_ms(50);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_latch_delete(l, &deleted), DLOCK_OK);
    assert_int_equal(deleted, 1);
    pthread_join(a.t, NULL);
    assert_int_equal(a.rc, DLOCK_OK);
    assert_true(a.done_at - t0 < 1000 * th_slack());
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_latch_free(l);
}

/* The pub/sub layer's rule behind it: a zero ends the wait of a waiter that
 * joined to settle and was armed (its barrier PING answered), wakes a
 * waiter that did not join to settle, and a "1" only wakes. */
static int zero_settles(const char *msg, size_t len)
{
    return len == 1 && msg[0] == '0' ? DLOCK__WAKE_ALL_DONE : DLOCK__WAKE_ALL;
}

static void test_zero_settles_armed_waiters(void **state)
{
    (void)state;
    char name[128], ch[200];
    th_name(name, sizeof(name), "latch-settle");
    channel_of(name, ch, sizeof(ch));
    int64_t far = th_now_ms() + 10000 * th_slack();
    dlock__waiter a, b;
    assert_int_equal(
        dlock__waiter_join(cli->pubsub, &a, ch, strlen(ch), zero_settles, 1, 1, far, NULL),
        DLOCK_OK);
    assert_int_equal(
        dlock__waiter_join(cli->pubsub, &b, ch, strlen(ch), zero_settles, 1, 0, far, NULL),
        DLOCK_OK);
    th_sleep_ms(200);   /* a's barrier PING answered */
    assert_true(th_publish(&srv, ch, "1") >= 0);
    assert_int_equal(dlock__waiter_wait(cli->pubsub, &a, far), DLOCK__WAKE_MESSAGE);
    assert_int_equal(dlock__waiter_wait(cli->pubsub, &b, far), DLOCK__WAKE_MESSAGE);
    assert_true(th_publish(&srv, ch, "0") >= 0);
    assert_int_equal(dlock__waiter_wait(cli->pubsub, &a, far), DLOCK__WAKE_DONE);
    assert_int_equal(dlock__waiter_wait(cli->pubsub, &b, far), DLOCK__WAKE_MESSAGE);
    dlock__waiter_leave(cli->pubsub, &a, 0);
    dlock__waiter_leave(cli->pubsub, &b, 0);
}

static void test_cancel(void **state)
{
    (void)state;
    char name[128], ch[200];
    dlock_latch *l = latch("latch-cancel", name, sizeof(name));
    channel_of(name, ch, sizeof(ch));
    assert_int_equal(dlock_latch_try_set_count(l, 1, NULL), DLOCK_OK);
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    awaiter a;
    start_awaiter(&a, l, DLOCK_WAIT_FOREVER, tok);
    assert_true(await_numsub(ch, 1, 5000));
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(a.t, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.done_at - t0 < 500 * th_slack());
    assert_int_equal(count_of(l), 1);
    assert_true(await_numsub(ch, 0, 5000));
    dlock_cancel_free(tok);
    dlock_latch_free(l);
}

/* ------------------------------------------------------- processes */

static long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Awaiters in 4 processes (5 threads each): one count-down wakes them all. */
static void test_awaiters_in_processes(void **state)
{
    (void)state;
    char name[128], ch[200];
    dlock_latch *l = latch("latch-procs", name, sizeof(name));
    channel_of(name, ch, sizeof(ch));
    assert_int_equal(dlock_latch_try_set_count(l, 1, NULL), DLOCK_OK);
    enum { P = 4 };
    pid_t pids[P];
    int fds[P];
    for (int i = 0; i < P; i++) {
        pids[i] = th_spawn(&fds[i], DLOCK_TEST_WORKER, "latch", srv.url, name, "5", NULL);
        assert_true(pids[i] > 0);
    }
    for (int i = 0; i < P; i++) {
        char line[64];
        assert_int_equal(th_read_line(fds[i], line, sizeof(line), 20000), 0);
        assert_string_equal(line, "ready");
    }
    assert_true(await_numsub(ch, P, 10000));
    th_sleep_ms(300);   /* every thread past its checks, asleep */
    long long t0 = mono_us();
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    long long last = 0;
    for (int i = 0; i < P; i++) {
        char line[64];
        long long at = 0;
        assert_int_equal(th_read_line(fds[i], line, sizeof(line), 20000), 0);
        assert_int_equal(sscanf(line, "done %lld", &at), 1);
        if (at > last)
            last = at;
        assert_int_equal(th_wait(pids[i], 10000), 0);
        close(fds[i]);
    }
    if (last - t0 > 1000000LL * th_slack())
        fail_msg("the last awaiter returned %lld us after the count-down", last - t0);
    dlock_latch_free(l);
}

/* ------------------------------------------------------------ interop */

/* Redisson's side played with Redis commands: its trySetCount (SET +
 * PUBLISH "1") and its countDown to zero (DECR, DEL, PUBLISH "0") on a name
 * with its own braces, which the channel wraps again. */
static void test_interop_redisson_counts_down(void **state)
{
    (void)state;
    char base[128], name[160], ch[220];
    th_name(base, sizeof(base), "latch-interop");
    snprintf(name, sizeof(name), "{%s}:go", base);
    snprintf(ch, sizeof(ch), "redisson_countdownlatch__channel__{%s}", name);
    dlock_latch *l;
    assert_int_equal(dlock_latch_get(cli, name, &l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "SET %s 2", name));
    assert_true(th_publish(&srv, ch, "1") >= 0);
    assert_int_equal(count_of(l), 2);
    awaiter a;
    start_awaiter(&a, l, 10000 * th_slack(), NULL);
    assert_true(await_numsub(ch, 1, 5000));
    assert_int_equal(th_int(&srv, "DECR %s", name), 1);
    th_sleep_ms(200);
    assert_false(is_done(&a));
    assert_int_equal(th_int(&srv, "DECR %s", name), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    int64_t t0 = th_now_ms();
    assert_true(th_publish(&srv, ch, "0") >= 0);
    pthread_join(a.t, NULL);
    assert_int_equal(a.rc, DLOCK_OK);
    assert_true(a.done_at - t0 < 1000 * th_slack());
    dlock_latch_free(l);
}

/* dlock's messages reach Redisson's awaiters: "1" for a new count, "0" at
 * zero, "1" for a delete; and the count is the plain string Redisson reads. */
static void test_interop_dlock_messages(void **state)
{
    (void)state;
    char name[128], ch[200];
    dlock_latch *l = latch("latch-msgs", name, sizeof(name));
    channel_of(name, ch, sizeof(ch));
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    redisReply *r;
    assert_int_equal(dlock_latch_try_set_count(l, 1, NULL), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "1");
    freeReplyObject(r);
    assert_int_equal(dlock_latch_count_down(l), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "0");
    freeReplyObject(r);
    assert_int_equal(dlock_latch_try_set_count(l, 7, NULL), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    freeReplyObject(r);
    r = th_cmd(&srv, "GET %s", name);
    assert_string_equal(r->str, "7");
    freeReplyObject(r);
    assert_int_equal(dlock_latch_delete(l, NULL), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "1");
    freeReplyObject(r);
    redisFree(sub);
    dlock_latch_free(l);
}

/* ------------------------------------------------------------ bad input */

static void test_bad_input(void **state)
{
    (void)state;
    char name[128];
    dlock_latch *l = latch("latch-bad", name, sizeof(name));
    assert_int_equal(dlock_latch_try_set_count(l, 3, NULL), DLOCK_OK);
    const int64_t bad[] = {0, -1, DLOCK_COUNT_MAX + 1};
    for (int i = 0; i < 3; i++) {
        dlock_latch *other = latch("latch-bad2", name, sizeof(name));
        int set = -1;
        assert_int_equal(dlock_latch_try_set_count(other, bad[i], &set), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "latch count"));
        assert_int_equal(set, -1);
        assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
        dlock_latch_free(other);
    }
    assert_int_equal(dlock_latch_await(l, -2), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_count(l, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_count_down(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_await(NULL, 0), DLOCK_EINVAL);
    dlock_latch *x = (dlock_latch *)1;
    assert_int_equal(dlock_latch_get(cli, "", &x), DLOCK_EINVAL);
    assert_null(x);
    assert_int_equal(count_of(l), 3);
    dlock_latch_free(NULL);
    dlock_latch_free(l);
}

static void test_wrong_type(void **state)
{
    (void)state;
    const char *kinds[] = {"HSET %s f v", "SADD %s m", "SET %s ready"};
    for (size_t k = 0; k < 3; k++) {
        char name[128];
        dlock_latch *l = latch("latch-wrong", name, sizeof(name));
        freeReplyObject(th_cmd(&srv, kinds[k], name));
        redisReply *before = th_cmd(&srv, "DUMP %s", name);
        int64_t n;
        int flag;
        assert_int_equal(dlock_latch_try_set_count(l, 2, &flag), DLOCK_EWRONGTYPE);
        assert_non_null(strstr(dlock_last_error(), "is not a count-down latch"));
        assert_int_equal(dlock_latch_count_down(l), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_latch_count(l, &n), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_latch_await(l, 100), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_latch_delete(l, &flag), DLOCK_EWRONGTYPE);
        redisReply *after = th_cmd(&srv, "DUMP %s", name);
        assert_int_equal(before->len, after->len);
        assert_memory_equal(before->str, after->str, before->len);
        freeReplyObject(before);
        freeReplyObject(after);
        dlock_latch_free(l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_down),
        cmocka_unit_test(test_await_timeout),
        cmocka_unit_test(test_many_awaiters),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_zero_settles_armed_waiters),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_awaiters_in_processes),
        cmocka_unit_test(test_interop_redisson_counts_down),
        cmocka_unit_test(test_interop_dlock_messages),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrong_type),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
