/* The fair lock: arrival order across threads and processes, only the head
 * woken, waiters that give up or die, live waiters never dropped, Redisson's
 * own scenarios, and a queue shared with Redisson's waiters (played here with
 * Redis commands in Redisson's layout and channels). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

static dlock_client *quick;  /* slot 400 ms */
#define QUICK_SLOT 400

static dlock_client *open_with_slot(int64_t slot_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_fair_wait_timeout(cfg, slot_ms), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

static int setup(void **state)
{
    if (th_setup(state) != 0)
        return -1;
    quick = open_with_slot(QUICK_SLOT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(quick);
    return th_teardown(state);
}

/* ------------------------------------------------------------- helpers */

static long long queue_len(const char *name)
{
    return th_int(&srv, "LLEN redisson_lock_queue:{%s}", name);
}

/* 1 when the queue holds exactly `n` entries within the time. */
static int await_queue_len(const char *name, long long n, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (th_now_ms() < end) {
        if (queue_len(name) == n)
            return 1;
        th_sleep_ms(5);
    }
    return queue_len(name) == n;
}

static int64_t server_ms(void)
{
    redisReply *r = th_cmd(&srv, "TIME");
    int64_t ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* A thread waiting on a fair lock, then holding it for hold_ms. */
typedef struct fwaiter {
    dlock_lock *l;
    int id;
    int64_t wait_ms;
    int64_t hold_ms;
    int rc;
    int64_t acquired_at;
    uint64_t attempts;         /* scripts the acquire sent */
    uint64_t wakeups, wasted;  /* message wake-ups it used; those that found it taken */
    char owner[DLOCK_OWNER_BUFSIZE];
    pthread_t t;
} fwaiter;

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int order[32];
static int norder;

static void *fwaiter_main(void *arg)
{
    fwaiter *w = arg;
    dlock_client_owner_id(dlock__lock_client(w->l), w->owner, sizeof(w->owner));
    uint64_t a0 = dlock__attempts, k0 = dlock__wakeups, x0 = dlock__wakeups_wasted;
    w->rc = dlock_lock_try(w->l, w->wait_ms, DLOCK_WATCHDOG);
    w->attempts = dlock__attempts - a0;
    w->wakeups = dlock__wakeups - k0;
    w->wasted = dlock__wakeups_wasted - x0;
    if (w->rc == DLOCK_OK) {
        w->acquired_at = th_now_ms();
        pthread_mutex_lock(&order_mu);
        order[norder++] = w->id;
        pthread_mutex_unlock(&order_mu);
        th_sleep_ms(w->hold_ms);
        assert_int_equal(dlock_lock_release(w->l), DLOCK_OK);
    }
    return NULL;
}

static void start_fwaiter(fwaiter *w, dlock_client *c, const char *name, int id, int64_t wait_ms)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(dlock_fair_lock_get(c, name, &w->l), DLOCK_OK);
    w->id = id;
    w->wait_ms = wait_ms;
    w->hold_ms = 20;
    pthread_create(&w->t, NULL, fwaiter_main, w);
}

static void join_fwaiter(fwaiter *w)
{
    pthread_join(w->t, NULL);
    dlock_lock_free(w->l);
}

/* ------------------------------------------------------------- order */

/* Threads queue one after another; the release hands the lock down the queue
 * in arrival order, and each waiter is woken once: only the head hears a
 * release (its own channel), so nobody retries in vain. */
static void test_arrival_order_threads(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-order");
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    enum { N = 6 };
    fwaiter w[N];
    norder = 0;
    for (int i = 0; i < N; i++) {
        start_fwaiter(&w[i], cli, name, i, DLOCK_WAIT_FOREVER);
        assert_true(await_queue_len(name, i + 1, 5000));
    }
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    for (int i = 0; i < N; i++)
        join_fwaiter(&w[i]);
    assert_int_equal(norder, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, DLOCK_OK);
        assert_int_equal(order[i], i);
        /* Woken once, by its turn: only the head hears a release. (A waiter
         * whose retry caught the lock between a release and the head's
         * acquisition looks again on a short timer, a few times at most, as
         * the turns go by: no polling, but more than 3 attempts.) */
        /* Under valgrind or on a loaded machine (slack > 1) a timer may fire
         * before the message it races: a little room there. The exact figure
         * is the bench's (section 2b: needless wake-ups). */
        uint64_t room = th_slack() > 1 ? 2 : 0;
        /* No wake-up at all is right for a head whose retry once subscribed
         * (its second attempt) came after the release: a slow subscription
         * (TLS under TSan) can take that long. Under valgrind or the
         * sanitizers a waiter's short retry timer may also beat its message:
         * not a wasted wake-up, so allowed there. */
        int unwoken_ok = w[i].wakeups == 0 &&
                         (th_slack() > 1 || (w[i].attempts <= 2 && i == 0));
        if ((w[i].wakeups < 1 && !unwoken_ok) || w[i].wakeups > 1 + room || w[i].wasted > room ||
            w[i].attempts > 8 + 4 * room)
            fail_msg("waiter %d: %llu wake-ups, %llu wasted, %llu attempts", i,
                     (unsigned long long)w[i].wakeups, (unsigned long long)w[i].wasted,
                     (unsigned long long)w[i].attempts);
    }
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(th_int(&srv, "EXISTS redisson_lock_timeout:{%s}", name), 0);
    dlock_lock_free(h);
}

/* Processes (tests/worker.c "fair"), each started once the previous one
 * queued: the ORDER list they write while holding the lock is arrival order. */
static void test_arrival_order_processes(void **state)
{
    (void)state;
    char name[128], orderkey[160];
    th_name(name, sizeof(name), "fair-procs");
    snprintf(orderkey, sizeof(orderkey), "%s:order", name);
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    enum { P = 4 };
    pid_t pids[P];
    int fds[P];
    for (int i = 0; i < P; i++) {
        char id[8];
        snprintf(id, sizeof(id), "%d", i);
        pids[i] = th_spawn(&fds[i], DLOCK_TEST_WORKER, "fair", srv.url, name, id, orderkey,
                           "0", NULL);
        assert_true(pids[i] > 0);
        assert_true(await_queue_len(name, i + 1, 10000));
    }
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    for (int i = 0; i < P; i++) {
        char line[32];
        assert_int_equal(th_read_line(fds[i], line, sizeof(line), 20000), 0);
        assert_int_equal(th_wait(pids[i], 10000), 0);
        close(fds[i]);
    }
    redisReply *r = th_cmd(&srv, "LRANGE %s 0 -1", orderkey);
    assert_int_equal(r->elements, P);
    for (int i = 0; i < P; i++)
        assert_int_equal(atoi(r->element[i]->str), i);
    freeReplyObject(r);
    dlock_lock_free(h);
}

/* A try with no wait never queues (Redisson's tryLock()): it takes a free lock
 * nobody waits for, and is refused while earlier waiters are queued. */
static void test_try_zero_never_queues(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-try0");
    dlock_lock *h, *t;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli, name, "other-owner:1", &t), DLOCK_OK);
    assert_int_equal(dlock_lock_try(h, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(t, 0, 5000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "held by another owner"));
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    /* Free, but a (Redisson) waiter is queued with a live deadline. */
    freeReplyObject(th_cmd(&srv, "RPUSH redisson_lock_queue:{%s} rid:9", name));
    freeReplyObject(th_cmd(&srv, "ZADD redisson_lock_timeout:{%s} %lld rid:9", name,
                           (long long)server_ms() + 60000));
    assert_int_equal(dlock_lock_try(t, 0, 5000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "earlier waiters go first"));
    assert_int_equal(queue_len(name), 1);
    /* Its deadline passes: it is dropped, and the lock is taken. */
    freeReplyObject(th_cmd(&srv, "ZADD redisson_lock_timeout:{%s} %lld rid:9", name,
                           (long long)server_ms() - 1));
    assert_int_equal(dlock_lock_try(t, 0, 5000), DLOCK_OK);
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(dlock_lock_release(t), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(t);
}

/* -------------------------------------------------- giving up, dying */

/* A waiter that times out or is cancelled leaves the queue at once; the one
 * behind it takes the next turn as soon as the holder releases. */
static void test_give_up_leaves_queue(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-giveup");
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    fwaiter a, b;
    norder = 0;
    start_fwaiter(&a, cli, name, 1, 300);               /* gives up after 300 ms */
    assert_true(await_queue_len(name, 1, 5000));
    start_fwaiter(&b, cli, name, 2, DLOCK_WAIT_FOREVER);
    assert_true(await_queue_len(name, 2, 5000));
    pthread_join(a.t, NULL);
    assert_int_equal(a.rc, DLOCK_ETIMEDOUT);
    assert_int_equal(queue_len(name), 1);               /* a is gone from the queue */
    assert_int_equal(th_int(&srv, "ZCARD redisson_lock_timeout:{%s}", name), 1);
    int64_t released = th_now_ms();
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    join_fwaiter(&b);
    assert_int_equal(b.rc, DLOCK_OK);
    assert_true(b.acquired_at - released < 1000 * th_slack());

    /* Cancelled: the same. */
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_cancel *cancel;
    assert_int_equal(dlock_cancel_new(&cancel), DLOCK_OK);
    dlock_lock *cl;
    assert_int_equal(dlock_fair_lock_get_as(cli, name, "canceller:1", &cl), DLOCK_OK);
    dlock_cancel_fire(cancel);
    assert_int_equal(dlock_lock_acquire_opts(cl, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER,
                                                                    .lease_ms = 1000,
                                                                    .cancel = cancel}),
                     DLOCK_ECANCELED);
    assert_int_equal(queue_len(name), 0);
    dlock_cancel_free(cancel);
    dlock_lock_free(cl);
    join_fwaiter(&a);
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    dlock_lock_free(h);
}

/* The leave script: a head that leaves while the lock is free wakes the new
 * head on its own channel, and the ones behind move up a slot. */
static void test_leaving_head_wakes_next(void **state)
{
    (void)state;
    char name[128], q[160], d[160], ch[260], prefix[200];
    th_name(name, sizeof(name), "fair-leave");
    snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
    snprintf(d, sizeof(d), "redisson_lock_timeout:{%s}", name);
    snprintf(prefix, sizeof(prefix), "redisson_lock__channel:{%s}", name);
    snprintf(ch, sizeof(ch), "%s:rid:2", prefix);
    freeReplyObject(th_cmd(&srv, "RPUSH %s rid:1 rid:2", q));
    freeReplyObject(th_cmd(&srv, "ZADD %s 1000000 rid:1 1000500 rid:2", d));
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    redisReply *r;
    const char *argv[] = {q, d, name, prefix, "rid:1", "500", "400"};
    dlock__req req = {.script = DLOCK__SCRIPT_FAIR_LEAVE, .nkeys = 4, .argc = 7, .argv = argv};
    assert_int_equal(dlock__call(cli, &req, &r), DLOCK_OK);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);   /* the wake-up */
    assert_string_equal(r->element[2]->str, "0");
    freeReplyObject(r);
    redisFree(sub);
    assert_int_equal(th_int(&srv, "LLEN %s", q), 1);
    r = th_cmd(&srv, "ZSCORE %s rid:2", d);
    assert_int_equal(atoll(r->str), 1000000);   /* moved up a slot */
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "DEL %s %s", q, d));
    /* Deadlines ahead: the new head's turn starts, cut to now + the grace
     * (ARGV[3], 3 s here), not to now + the leaver's own slot (500 ms). */
    int64_t t0 = server_ms();
    freeReplyObject(th_cmd(&srv, "RPUSH %s rid:1 rid:2", q));
    freeReplyObject(th_cmd(&srv, "ZADD %s %lld rid:1 %lld rid:2", d, (long long)t0 + 60000,
                           (long long)t0 + 60500));
    const char *argv2[] = {q, d, name, prefix, "rid:1", "500", "3000"};
    req.argv = argv2;
    assert_int_equal(dlock__call(cli, &req, &r), DLOCK_OK);
    freeReplyObject(r);
    int64_t t1 = server_ms();
    r = th_cmd(&srv, "ZSCORE %s rid:2", d);
    assert_true(atoll(r->str) >= t0 + 3000 && atoll(r->str) <= t1 + 3000);
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "DEL %s %s", q, d));
}

/* One fair script, called as the client calls it; its reply. */
static redisReply *fair_script(int script, int nkeys, int argc, const char *const *argv)
{
    redisReply *r = NULL;
    dlock__req req = {.script = script, .nkeys = nkeys, .argc = argc, .argv = argv};
    assert_int_equal(dlock__call(cli, &req, &r), DLOCK_OK);
    assert_non_null(r);
    return r;
}

/* A newcomer that joins behind an entry whose deadline passed unrenewed (a
 * dead waiter behind a live head that renews its own, or an entry a failover
 * brought back after its waiter had left) keeps its place: the fair-order
 * violation safety_fair_failover_sentinel_kill saw in CI, played step by step
 * with the scripts. The newcomer used to get that stale deadline + one slot,
 * still in the past: once the head had gone, the holder's release dropped
 * the stale entry and the newcomer with it, and the holder took the lock
 * again at once, past a waiter whose next attempt (which renews its entry)
 * had not come yet. */
static void test_join_behind_stale_entry(void **state)
{
    (void)state;
    char name[128], q[160], d[160], prefix[200], latch[240], tok[160];
    th_name(name, sizeof(name), "fair-stale");
    snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
    snprintf(d, sizeof(d), "redisson_lock_timeout:{%s}", name);
    snprintf(prefix, sizeof(prefix), "redisson_lock__channel:{%s}", name);
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:%032d", name, 0);
    snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", name);
    /* KEYS: lock, queue, deadlines, token; ARGV: lease, owner, slot, fenced,
     * queue, grace (a 2 s slot and grace, as in the safety run). */
    const char *try_b[] = {name, q, d, tok, "30000", "b:1", "2000", "0", "0", "2000"};
    const char *join_a[] = {name, q, d, tok, "30000", "a:1", "2000", "0", "1", "2000"};
    redisReply *r = fair_script(DLOCK__SCRIPT_FAIR_ACQUIRE, 4, 10, try_b);
    assert_int_equal(r->type, REDIS_REPLY_NIL);   /* b holds the lock */
    freeReplyObject(r);
    /* h: a live head (its deadline renewed), g behind it: nobody renews it. */
    int64_t t0 = server_ms();
    freeReplyObject(th_cmd(&srv, "RPUSH %s h:1 g:1", q));
    freeReplyObject(th_cmd(&srv, "ZADD %s %lld h:1 %lld g:1", d, (long long)t0 + 60000,
                           (long long)t0 - 60000));
    r = fair_script(DLOCK__SCRIPT_FAIR_ACQUIRE, 4, 10, join_a);   /* a's first attempt */
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->element[1]->integer, 0);   /* held: a queues */
    freeReplyObject(r);
    assert_int_equal(queue_len(name), 3);
    /* h gives up; then b releases and tries again at once, without waiting. */
    const char *leave_h[] = {q, d, name, prefix, "h:1", "2000", "2000"};
    freeReplyObject(fair_script(DLOCK__SCRIPT_FAIR_LEAVE, 4, 7, leave_h));
    const char *release_b[] = {name, q, d, prefix, latch, "b:1", "0", "10000", "2000"};
    freeReplyObject(fair_script(DLOCK__SCRIPT_FAIR_RELEASE, 5, 9, release_b));
    r = fair_script(DLOCK__SCRIPT_FAIR_ACQUIRE, 4, 10, try_b);
    if (r->type != REDIS_REPLY_ARRAY)
        fail_msg("b took the lock again past a, which queued before it (queue now %lld long)",
                 queue_len(name));
    assert_int_equal(r->element[1]->integer, 1);   /* free, but an earlier waiter goes first */
    freeReplyObject(r);
    r = th_cmd(&srv, "LRANGE %s 0 -1", q);   /* the dead entry is gone, a is the head */
    assert_int_equal(r->elements, 1);
    assert_string_equal(r->element[0]->str, "a:1");
    freeReplyObject(r);
    r = fair_script(DLOCK__SCRIPT_FAIR_ACQUIRE, 4, 10, join_a);   /* a's next attempt */
    assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    assert_int_equal(queue_len(name), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s %s %s %s", name, d, latch, tok));
}

/* A waiter killed at the head delays the next one by its slot at most. */
static void test_dead_waiter_delays_one_slot(void **state)
{
    (void)state;
    char name[128], orderkey[160], slot[16];
    th_name(name, sizeof(name), "fair-dead");
    snprintf(orderkey, sizeof(orderkey), "%s:order", name);
    snprintf(slot, sizeof(slot), "%d", QUICK_SLOT);
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(quick, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    int fd1, fd2;
    pid_t dead = th_spawn(&fd1, DLOCK_TEST_WORKER, "fair", srv.url, name, "1", orderkey, slot,
                          NULL);
    assert_true(await_queue_len(name, 1, 10000));
    pid_t live = th_spawn(&fd2, DLOCK_TEST_WORKER, "fair", srv.url, name, "2", orderkey, slot,
                          NULL);
    assert_true(await_queue_len(name, 2, 10000));
    kill(dead, SIGKILL);
    th_wait(dead, 5000);
    int64_t released = th_now_ms();
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);   /* wakes the dead head: nobody */
    char line[32];
    assert_int_equal(th_read_line(fd2, line, sizeof(line), 20000), 0);
    int64_t took = th_now_ms() - released;
    assert_int_equal(th_wait(live, 10000), 0);
    if (took > (QUICK_SLOT + 700) * th_slack())
        fail_msg("the live waiter waited %lld ms behind a dead one (slot %d ms)",
                 (long long)took, QUICK_SLOT);
    redisReply *r = th_cmd(&srv, "LRANGE %s 0 -1", orderkey);
    assert_int_equal(r->elements, 1);
    assert_string_equal(r->element[0]->str, "2");
    freeReplyObject(r);
    close(fd1);
    close(fd2);
    dlock_lock_free(h);
}

/* Beyond Redisson: live waiters stay queued however long the holder keeps
 * the lock (here 5 slots), in their order, and then take their turns. */
static void test_live_waiters_never_dropped(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-live");
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(quick, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    fwaiter a, b;
    norder = 0;
    start_fwaiter(&a, quick, name, 1, DLOCK_WAIT_FOREVER);
    assert_true(await_queue_len(name, 1, 5000));
    start_fwaiter(&b, quick, name, 2, DLOCK_WAIT_FOREVER);
    assert_true(await_queue_len(name, 2, 5000));
    int64_t end = th_now_ms() + 5 * QUICK_SLOT;
    while (th_now_ms() < end) {
        assert_int_equal(queue_len(name), 2);
        th_sleep_ms(25);
    }
    assert_int_equal(dlock_lock_release(h), DLOCK_OK);
    join_fwaiter(&a);
    join_fwaiter(&b);
    assert_int_equal(norder, 2);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    dlock_lock_free(h);
}

/* ------------------------------------------------ Redisson's scenarios */

/* A thread that takes the lock with a lease and never releases it. */
static void *lease_main(void *arg)
{
    fwaiter *w = arg;
    w->rc = dlock_lock_try(w->l, 10000 * th_slack(), 300);
    if (w->rc == DLOCK_OK) {
        pthread_mutex_lock(&order_mu);
        order[norder++] = w->id;
        pthread_mutex_unlock(&order_mu);
    }
    return NULL;
}

/* RedissonFairLockTest.testLeaseTimeout, scaled: waiters arriving 100 ms
 * apart, each taking the lock with a lease it never releases, get it in
 * arrival order as each lease runs out (nothing is published then: each head
 * wakes at the holder's TTL). */
static void test_lease_timeout_order(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-lease");
    enum { N = 5 };
    fwaiter w[N];
    norder = 0;
    for (int i = 0; i < N; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        assert_int_equal(dlock_fair_lock_get(cli, name, &w[i].l), DLOCK_OK);
        pthread_create(&w[i].t, NULL, lease_main, &w[i]);
        th_sleep_ms(100);
    }
    for (int i = 0; i < N; i++)
        join_fwaiter(&w[i]);
    assert_int_equal(norder, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, DLOCK_OK);
        assert_int_equal(order[i], i);
    }
}

/* RedissonFairLockTest's getHoldCount, forceUnlock, isLocked, tryLock(wait)
 * and expiry scenarios. */
static void test_redisson_basics(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-basics");
    dlock_lock *l, *other;
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli, name, "someone:2", &other), DLOCK_OK);
    int64_t n = -1;
    int locked = -1;
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);   /* reentrant */
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 1);
    /* tryLock(wait) against a holder: gives up at the deadline, not before */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(other, 500, 1000), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 490 && took < 500 + 1000 * th_slack());
    assert_int_equal(queue_len(name), 0);   /* and left the queue */
    /* a release by the wrong owner */
    assert_int_equal(dlock_lock_release(other), DLOCK_ENOTOWNER);
    /* forceUnlock */
    int was = 0;
    assert_int_equal(dlock_lock_force_release(other, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    /* a lease runs out by itself */
    assert_int_equal(dlock_lock_try(l, 0, 200), DLOCK_OK);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(other, 5000, 1000), DLOCK_OK);
    took = th_now_ms() - t0;
    assert_true(took >= 150 && took < 200 + 1000 * th_slack());
    uint64_t tok1 = 0, tok2 = 0;
    assert_int_equal(
        dlock_lock_acquire_opts(other, &(dlock_wait_opts){.lease_ms = 1000, .token = &tok1}),
        DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 1000, .token = &tok2}), DLOCK_OK);
    assert_true(tok2 > tok1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(other);
}

/* A watchdog hold of a fair lock is renewed like any lock's. */
static void test_watchdog_renews_fair_hold(void **state)
{
    (void)state;
    /* Renewals every 100 ms, or every 500 ms under the sanitizers and valgrind. */
    const int64_t wd = th_slack() > 1 ? 1500 : 300;
    dlock_client *c = th_client(&srv, wd);
    char name[128];
    th_name(name, sizeof(name), "fair-wd");
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(wd * 10 / 3);   /* > 3 watchdog timeouts */
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ------------------------------------------------------------ Redisson */

/* A Redisson holder blocks a dlock waiter; Redisson's unlock (DEL, then "0"
 * on the head's own channel) wakes it at once, not at the holder's TTL. */
static void test_redisson_release_wakes_dlock(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-rd");
    freeReplyObject(th_cmd(&srv, "HSET %s 9b2f0c3e-0000-4000-8000-000000000001:7 1", name));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 30000", name));
    fwaiter w;
    norder = 0;
    start_fwaiter(&w, cli, name, 1, DLOCK_WAIT_FOREVER);
    assert_true(await_queue_len(name, 1, 5000));
    th_sleep_ms(100);
    assert_int_equal(norder, 0);
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    char pch_w[300];
    snprintf(pch_w, sizeof(pch_w), "redisson_lock__channel:{%s}:%s", name, w.owner);
    assert_true(th_publish(&srv, pch_w, "0") >= 0);
    join_fwaiter(&w);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.acquired_at - t0 < 1000 * th_slack());
}

/* Arrival order in both directions with a Redisson waiter in the middle of the
 * queue: D1 (dlock), R (Redisson), D2 (dlock). D1's release wakes R on R's
 * channel and D2 keeps waiting; R takes its turn as Redisson would, and R's
 * release wakes D2. */
static void test_mixed_queue_with_redisson(void **state)
{
    (void)state;
    char name[128], rch[220];
    th_name(name, sizeof(name), "fair-mixed");
    const char *rid = "9b2f0c3e-0000-4000-8000-000000000002:11";
    snprintf(rch, sizeof(rch), "redisson_lock__channel:{%s}:%s", name, rid);
    dlock_lock *h;
    assert_int_equal(dlock_fair_lock_get(cli, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    fwaiter d1, d2;
    norder = 0;
    start_fwaiter(&d1, cli, name, 1, DLOCK_WAIT_FOREVER);
    d1.hold_ms = 100;
    assert_true(await_queue_len(name, 1, 5000));
    /* R queues as Redisson does: at the end, its deadline the last one's + its slot. */
    redisContext *rsub = th_subscribe(&srv, rch);
    assert_non_null(rsub);
    redisReply *r = th_cmd(&srv, "ZSCORE redisson_lock_timeout:{%s} %s", name, d1.owner);
    long long d1_deadline = atoll(r->str);
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "ZADD redisson_lock_timeout:{%s} %lld %s", name,
                           d1_deadline + 300000, rid));
    freeReplyObject(th_cmd(&srv, "RPUSH redisson_lock_queue:{%s} %s", name, rid));
    start_fwaiter(&d2, cli, name, 2, DLOCK_WAIT_FOREVER);
    assert_true(await_queue_len(name, 3, 5000));

    assert_int_equal(dlock_lock_release(h), DLOCK_OK);   /* D1's turn */
    join_fwaiter(&d1);
    assert_int_equal(d1.rc, DLOCK_OK);
    /* D1's release woke R, the new head, on R's own channel. */
    struct timeval tv = {(time_t)(5 * th_slack()), 0};
    redisSetTimeout(rsub, tv);
    assert_int_equal(redisGetReply(rsub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[1]->str, rch);
    freeReplyObject(r);
    th_sleep_ms(200);
    assert_int_equal(norder, 1);   /* D2 still waits behind R */
    /* R takes the lock in Redisson's layout and moves the others up a slot. */
    freeReplyObject(th_cmd(&srv, "LPOP redisson_lock_queue:{%s}", name));
    freeReplyObject(th_cmd(&srv, "ZREM redisson_lock_timeout:{%s} %s", name, rid));
    freeReplyObject(th_cmd(&srv, "ZINCRBY redisson_lock_timeout:{%s} -300000 %s", name,
                           d2.owner));
    freeReplyObject(th_cmd(&srv, "HSET %s %s 1", name, rid));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 30000", name));
    th_sleep_ms(100);
    assert_int_equal(norder, 1);
    /* R's release: DEL, then "0" to the head's (D2's) channel. */
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    char pch_d2[300];
    snprintf(pch_d2, sizeof(pch_d2), "redisson_lock__channel:{%s}:%s", name, d2.owner);
    assert_true(th_publish(&srv, pch_d2, "0") >= 0);
    join_fwaiter(&d2);
    assert_int_equal(d2.rc, DLOCK_OK);
    assert_true(d2.acquired_at - t0 < 1000 * th_slack());
    assert_int_equal(norder, 2);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    redisFree(rsub);
    dlock_lock_free(h);
}

/* ------------------------------------------- the head keeps its turn */

/* Puts `id` at the head of the queue with a deadline `ahead_ms` from the
 * server's now (negative: in the past), the lock itself free: what a live
 * (or, in the past, a dead) Redisson waiter leaves in Redis. */
static void queue_head(const char *name, const char *id, int64_t ahead_ms)
{
    freeReplyObject(th_cmd(&srv, "RPUSH redisson_lock_queue:{%s} %s", name, id));
    freeReplyObject(th_cmd(&srv, "ZADD redisson_lock_timeout:{%s} %lld %s", name,
                           (long long)(server_ms() + ahead_ms), id));
}

static long long head_deadline(const char *name, const char *id)
{
    redisReply *r = th_cmd(&srv, "ZSCORE redisson_lock_timeout:{%s} %s", name, id);
    long long d = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return d;
}

/* A live Redisson waiter at the head (deadline 60 s ahead), the lock free: a
 * newcomer's try(500) is refused as Redisson's own script refuses it; the
 * head keeps its place and a deadline of at least the grace owed (the fair
 * wait timeout, 5 minutes by default, so its own 60 s here); the newcomer
 * leaves the queue. */
static void test_head_keeps_turn(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-head");
    const char *rid = "9b2f0c3e-0000-4000-8000-000000000003:5";
    queue_head(name, rid, 60000);
    long long before = head_deadline(name, rid);
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(l, 500, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "earlier waiters go first"));
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 490 && took < 500 + 1000 * th_slack());
    int locked = -1;
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    redisReply *r = th_cmd(&srv, "LRANGE redisson_lock_queue:{%s} 0 -1", name);
    assert_int_equal(r->elements, 1);   /* the head, alone: the newcomer left */
    assert_string_equal(r->element[0]->str, rid);
    freeReplyObject(r);
    assert_int_equal(th_int(&srv, "ZCARD redisson_lock_timeout:{%s}", name), 1);
    assert_int_equal(head_deadline(name, rid), before);   /* its own, sooner than the grace */
    dlock_lock_free(l);
    freeReplyObject(th_cmd(&srv, "DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}",
                           name, name));
}

/* The head's deadline is in the past (it died): a newcomer's try(500) drops it
 * and takes the lock at once. */
static void test_dead_head_passed_at_once(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-deadhead");
    queue_head(name, "9b2f0c3e-0000-4000-8000-000000000004:5", -1);
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(l, 500, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 400 * th_slack());
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(th_int(&srv, "EXISTS redisson_lock_timeout:{%s}", name), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A fair wait timeout of 1 s: a head 60 s from its deadline is owed 1 s once
 * the lock is found free. try(500) is refused; try(2000) passes it after the
 * grace (and not before). */
static void test_head_grace_is_fair_wait_timeout(void **state)
{
    (void)state;
    enum { GRACE = 1000 };
    dlock_client *c = open_with_slot(GRACE);
    char name[128];
    th_name(name, sizeof(name), "fair-grace");
    const char *rid = "9b2f0c3e-0000-4000-8000-000000000005:5";
    queue_head(name, rid, 60000);
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(c, name, &l), DLOCK_OK);
    int64_t free_at = server_ms();
    assert_int_equal(dlock_lock_try(l, 500, 10000), DLOCK_ETIMEDOUT);
    assert_int_equal(queue_len(name), 1);
    long long d = head_deadline(name, rid);
    /* the grace started when the lock was found free: cut to about now + 1 s,
     * not to now + the newcomer's 500 ms */
    assert_true(d >= free_at + GRACE && d <= free_at + GRACE + 500 * th_slack());
    assert_int_equal(dlock_lock_try(l, 2000 * th_slack(), 10000), DLOCK_OK);
    assert_true(server_ms() >= d);
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ----------------------------------------------------------- bad input */

/* A name holding something else is refused before anything is written: no
 * queue entry appears. */
static void test_wrong_types(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fair-bad");
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "SET %s plain", name));
    assert_int_equal(dlock_lock_try(l, 100, 1000), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "fair lock"));
    assert_int_equal(th_int(&srv, "EXISTS redisson_lock_queue:{%s}", name), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "HSET %s color blue", name));
    assert_int_equal(dlock_lock_try(l, 100, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_force_release(l, NULL), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "SET redisson_lock_queue:{%s} x", name));
    assert_int_equal(dlock_lock_try(l, 100, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    freeReplyObject(th_cmd(&srv, "DEL redisson_lock_queue:{%s}", name));
    dlock_lock_free(l);
    assert_int_equal(dlock_fair_lock_get_as(cli, name, "no-colon", &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_fair_lock_get(cli, "", &l), DLOCK_EINVAL);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_fair_wait_timeout(cfg, -5), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_fair_wait_timeout(cfg, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_fair_wait_timeout(cfg, 0), DLOCK_OK);
    dlock_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arrival_order_threads),
        cmocka_unit_test(test_arrival_order_processes),
        cmocka_unit_test(test_try_zero_never_queues),
        cmocka_unit_test(test_give_up_leaves_queue),
        cmocka_unit_test(test_leaving_head_wakes_next),
        cmocka_unit_test(test_join_behind_stale_entry),
        cmocka_unit_test(test_dead_waiter_delays_one_slot),
        cmocka_unit_test(test_live_waiters_never_dropped),
        cmocka_unit_test(test_lease_timeout_order),
        cmocka_unit_test(test_redisson_basics),
        cmocka_unit_test(test_watchdog_renews_fair_hold),
        cmocka_unit_test(test_redisson_release_wakes_dlock),
        cmocka_unit_test(test_mixed_queue_with_redisson),
        cmocka_unit_test(test_head_keeps_turn),
        cmocka_unit_test(test_dead_head_passed_at_once),
        cmocka_unit_test(test_head_grace_is_fair_wait_timeout),
        cmocka_unit_test(test_wrong_types),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
