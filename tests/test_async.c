/* The asynchronous API on a real Redis: every lock type's acquire, release
 * and force release; waits woken by pub/sub (by this client and another);
 * cancellation and its race with a release; a thousand pending waiters from
 * one thread, handed the lock in turn; the client closed with calls pending;
 * Redis restarted with calls pending; bad input. */
#include <dirent.h>
#include <malloc.h>
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

#include <uv.h>

#include "dlock/async.h"
#include "fixture.h"
#include "sync/sync.h"

/* ------------------------------------------------------------ helpers */

/* What callbacks reported, for the test thread to wait on. */
typedef struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int ok;
    int status;              /* the last one's */
    uint64_t token;
    int was_locked;
    int by_status[20];       /* calls per -status (0..19) */
    int64_t count;           /* the last count a callback reported */
    const uint64_t *out;     /* a fenced call's token out-parameter, or NULL */
    uint64_t out_seen;       /* what it held when the callback ran */
    char msg[256];
} rec;

static void rec_init(rec *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_done(rec *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* The last permit id a callback saw (the permit tests run one at a time). */
static char the_permit_id[DLOCK_PERMIT_ID_BUFSIZE];

static void on_rec(const dlock_async_result *res, void *ud)
{
    rec *r = ud;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->status = dlock_async_status(res);
    if (r->status == DLOCK_OK)
        r->ok++;
    if (-r->status >= 0 && -r->status < 20)
        r->by_status[-r->status]++;
    r->token = dlock_async_token(res);
    if (r->out)
        r->out_seen = *r->out;
    r->was_locked = dlock_async_flag(res);
    snprintf(r->msg, sizeof(r->msg), "%s", dlock_async_message(res));
    if (dlock_async_permit_id(res)[0])
        snprintf(the_permit_id, sizeof(the_permit_id), "%s", dlock_async_permit_id(res));
    r->count = dlock_async_count(res);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until r has seen n calls; returns how many it saw. */
static int rec_wait(rec *r, int n, int64_t timeout_ms)
{
    int64_t until = th_now_ms() + timeout_ms * th_slack();
    pthread_mutex_lock(&r->mu);
    while (r->calls < n && th_now_ms() < until) {
        pthread_mutex_unlock(&r->mu);
        th_sleep_ms(2);
        pthread_mutex_lock(&r->mu);
    }
    int c = r->calls;
    pthread_mutex_unlock(&r->mu);
    return c;
}

static int rec_calls(rec *r)
{
    pthread_mutex_lock(&r->mu);
    int c = r->calls;
    pthread_mutex_unlock(&r->mu);
    return c;
}

/* Runs one asynchronous call (expr uses &r) and waits for its callback. */
#define RUN1(r, expr)                                   \
    do {                                                \
        rec_init(&(r));                                 \
        assert_int_equal((expr), DLOCK_OK);             \
        assert_int_equal(rec_wait(&(r), 1, 5000), 1);   \
    } while (0)

static dlock_lock *get_as(dlock_client *c, const char *name, const char *owner)
{
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get_as(c, name, owner, &l), DLOCK_OK);
    return l;
}

static void new_owner(dlock_client *c, char *buf)
{
    assert_int_equal(dlock_client_new_owner_id(c, buf, DLOCK_OWNER_BUFSIZE), DLOCK_OK);
}

static int threads_now(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* One synchronous-looking async call: start, wait, return its status. */
static int run_acquire(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, rec *r)
{
    rec_init(r);
    assert_int_equal(
        dlock_lock_acquire_async(l, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms},
                                 on_rec, r),
        DLOCK_OK);
    assert_int_equal(rec_wait(r, 1, 10000 + (wait_ms > 0 ? wait_ms : 0)), 1);
    return r->status;
}

static int run_release(dlock_lock *l)
{
    rec r;
    rec_init(&r);
    assert_int_equal(dlock_lock_release_async(l, on_rec, &r), DLOCK_OK);
    assert_int_equal(rec_wait(&r, 1, 10000), 1);
    int st = r.status;
    rec_done(&r);
    return st;
}

/* ------------------------------------------------------------ basics */

static void test_acquire_release(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-basic");
    new_owner(cli, owner);
    dlock_lock *l = get_as(cli, name, owner);
    rec r;
    assert_int_equal(run_acquire(l, 0, DLOCK_WATCHDOG, &r), DLOCK_OK);
    assert_string_equal(r.msg, "");
    rec_done(&r);
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    /* Reentrant: a second hold, then two releases. */
    assert_int_equal(run_acquire(l, 0, DLOCK_WATCHDOG, &r), DLOCK_OK);
    rec_done(&r);
    int64_t n = 0;
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    /* The queries, asynchronously. */
    rec q;
    RUN1(q, dlock_lock_hold_count_async(l, on_rec, &q));
    assert_int_equal(q.status, DLOCK_OK);
    assert_int_equal(q.count, 2);
    RUN1(q, dlock_lock_is_held_async(l, on_rec, &q));
    assert_int_equal(q.was_locked, 1);
    RUN1(q, dlock_lock_is_locked_async(l, on_rec, &q));
    assert_int_equal(q.was_locked, 1);
    RUN1(q, dlock_lock_ttl_async(l, on_rec, &q));
    assert_true(q.count > 0 && q.count <= 30000);
    rec_done(&q);
    assert_int_equal(run_release(l), DLOCK_OK);
    assert_int_equal(run_release(l), DLOCK_OK);
    int locked = 1;
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    RUN1(q, dlock_lock_is_locked_async(l, on_rec, &q));
    assert_int_equal(q.status, DLOCK_OK);
    assert_int_equal(q.was_locked, 0);
    RUN1(q, dlock_lock_ttl_async(l, on_rec, &q));
    assert_int_equal(q.count, -2);
    rec_done(&q);
    /* A third release: not held. */
    rec rr;
    rec_init(&rr);
    assert_int_equal(dlock_lock_release_async(l, on_rec, &rr), DLOCK_OK);
    assert_int_equal(rec_wait(&rr, 1, 10000), 1);
    assert_int_equal(rr.status, DLOCK_ENOTOWNER);
    assert_non_null(strstr(rr.msg, owner));
    rec_done(&rr);
    /* Leased: the key's TTL is the lease, the blocking release works on it. */
    assert_int_equal(run_acquire(l, 0, 60000, &r), DLOCK_OK);
    rec_done(&r);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_ttl(l, &ttl), DLOCK_OK);
    assert_true(th_ttl_within(ttl, 60000, 10000));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_client_async_pending(cli), 0);
    dlock_lock_free(l);
}

static void test_fenced_tokens_increase(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-fenced");
    new_owner(cli, owner);
    dlock_lock *l = get_as(cli, name, owner);
    uint64_t last = 0;
    for (int i = 0; i < 3; i++) {
        rec r;
        rec_init(&r);
        uint64_t token = 0;
        r.out = &token;   /* the options' token is written before the callback runs */
        assert_int_equal(
            dlock_lock_acquire_async(l, &(dlock_wait_opts){.token = &token}, on_rec, &r), DLOCK_OK);
        assert_int_equal(rec_wait(&r, 1, 10000), 1);
        assert_int_equal(r.status, DLOCK_OK);
        assert_true(r.token > last);
        assert_true(r.out_seen == r.token);
        assert_true(token == r.token);
        last = r.token;
        rec_done(&r);
        assert_int_equal(run_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
}

static void test_force_release(void **state)
{
    (void)state;
    char name[128], a[DLOCK_OWNER_BUFSIZE], b[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-force");
    new_owner(cli, a);
    new_owner(cli, b);
    dlock_lock *la = get_as(cli, name, a), *lb = get_as(cli, name, b);
    assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
    for (int expect = 1; expect >= 0; expect--) {
        rec r;
        rec_init(&r);
        assert_int_equal(dlock_lock_force_release_async(lb, on_rec, &r), DLOCK_OK);
        assert_int_equal(rec_wait(&r, 1, 10000), 1);
        assert_int_equal(r.status, DLOCK_OK);
        assert_int_equal(r.was_locked, expect);
        rec_done(&r);
    }
    int locked = 1;
    assert_int_equal(dlock_lock_is_locked(la, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

static void test_bad_input(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-bad");
    new_owner(cli, owner);
    rec r;
    rec_init(&r);
    dlock_lock *mine = NULL;
    assert_int_equal(dlock_lock_get(cli, name, &mine), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_async(mine, NULL, on_rec, &r), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "explicit owner"));
    assert_int_equal(dlock_lock_release_async(mine, on_rec, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_force_release_async(mine, on_rec, &r), DLOCK_EINVAL);
    dlock_lock *l = get_as(cli, name, owner);
    assert_int_equal(dlock_lock_acquire_async(NULL, NULL, on_rec, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_async(l, NULL, NULL, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_async(l, &(dlock_wait_opts){.lease_ms = -5}, on_rec, &r),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease"));
    assert_int_equal(dlock_lock_acquire_async(l, &(dlock_wait_opts){.wait_ms = -7}, on_rec, &r),
                     DLOCK_EINVAL);
    /* A key of another type: DLOCK_EWRONGTYPE in the callback, the key untouched. */
    freeReplyObject(th_cmd(&srv, "SET %s somebody", name));
    assert_int_equal(dlock_lock_acquire_async(l, &(dlock_wait_opts){.wait_ms = 1000}, on_rec, &r),
                     DLOCK_OK);
    assert_int_equal(rec_wait(&r, 1, 10000), 1);
    assert_int_equal(r.status, DLOCK_EWRONGTYPE);
    assert_non_null(strstr(r.msg, name));
    redisReply *v = th_cmd(&srv, "GET %s", name);
    assert_non_null(v);
    assert_string_equal(v->str, "somebody");
    freeReplyObject(v);
    th_sleep_ms(50);
    assert_int_equal(rec_calls(&r), 1);   /* refused calls never called back */
    rec_done(&r);
    dlock_lock_free(mine);
    dlock_lock_free(l);
}

/* ------------------------------------------------------------- waits */

static void test_try_and_timeout(void **state)
{
    (void)state;
    char name[128], a[DLOCK_OWNER_BUFSIZE], b[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-timeout");
    new_owner(cli, a);
    new_owner(cli, b);
    dlock_lock *la = get_as(cli, name, a), *lb = get_as(cli, name, b);
    assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
    rec r;
    assert_int_equal(run_acquire(lb, 0, DLOCK_WATCHDOG, &r), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(r.msg, "held by another owner"));
    rec_done(&r);
    int64_t t0 = th_now_ms();
    assert_int_equal(run_acquire(lb, 300, DLOCK_WATCHDOG, &r), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 290);
    assert_true(took < 5000 * th_slack());
    rec_done(&r);
    /* The waiter left its channel. */
    assert_int_equal(dlock_client_async_pending(cli), 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

static void test_woken_by_other_client(void **state)
{
    (void)state;
    dlock_client *other = th_client(&srv, 0);
    char name[128], a[DLOCK_OWNER_BUFSIZE], b[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-wake");
    new_owner(other, a);
    new_owner(cli, b);
    dlock_lock *la = get_as(other, name, a), *lb = get_as(cli, name, b);
    /* Held with the watchdog (TTL 30 s): only the unlock message can wake us soon. */
    assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
    rec r;
    rec_init(&r);
    dlock_stats s0, s1;
    assert_int_equal(dlock_client_stats(cli, &s0, sizeof(s0)), DLOCK_OK);
    assert_int_equal(
        dlock_lock_acquire_async(lb, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, on_rec, &r),
        DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(dlock_client_async_pending(cli), 1);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(rec_wait(&r, 1, 5000), 1);
    assert_int_equal(r.status, DLOCK_OK);
    assert_true(th_now_ms() - t0 < 5000 * th_slack());
    /* The client's statistics count the asynchronous wait as a blocking one. */
    assert_int_equal(dlock_client_stats(cli, &s1, sizeof(s1)), DLOCK_OK);
    assert_int_equal(s1.acquisitions - s0.acquisitions, 1);
    assert_int_equal(s1.waits - s0.waits, 1);
    assert_int_equal(s1.wakeups - s0.wakeups, 1);
    assert_int_equal(s1.wakeups_taken - s0.wakeups_taken, 0);
    assert_int_equal(s1.handoff_gap.count - s0.handoff_gap.count, 1);
    assert_int_equal(s1.acquire_wait.count - s0.acquire_wait.count, 1);
    assert_true(s1.acquire_wait.sum_us - s0.acquire_wait.sum_us >= 250000);   /* slept 300 ms */
    int held = 0;
    assert_int_equal(dlock_lock_is_held(lb, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(run_release(lb), DLOCK_OK);
    rec_done(&r);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(other);
}

/* A thousand waiters from this thread; each, once it holds the lock,
 * releases it from its callback, which wakes the next. */
#define MANY 1000

typedef struct chain {
    dlock_lock *l[MANY];
    rec acq, rel;
    int holders;             /* holding now (io thread only) */
    int max_holders;
} chain;

static chain *the_chain;
/* The thousand waiters' own: never another test's, so that their callbacks
 * (completed by the close at the end when that test failed half-way) find
 * the chain they were started with, not a later test's, freed. */
static chain *many_chain;

/* Checks on the io thread cannot fail there (cmocka jumps back to the test
 * thread's frame): they count, the test thread asserts the count. */
static atomic_int io_failures;

static size_t waiters_on(dlock_lock *l)
{
    size_t len;
    const char *ch = dlock__lock_channel(l, &len);
    return dlock__pubsub_waiters(dlock__lock_client(l)->pubsub, ch, len);
}

static void on_chain_released(const dlock_async_result *res, void *ud)
{
    on_rec(res, &the_chain->rel);
    (void)ud;
}

static void on_chain_acquired(const dlock_async_result *res, void *ud)
{
    chain *ch = many_chain;
    size_t i = (size_t)(uintptr_t)ud;
    if (dlock_async_status(res) == DLOCK_OK) {
        if (++ch->holders > ch->max_holders)
            ch->max_holders = ch->holders;
        ch->holders--;
        if (dlock_lock_release_async(ch->l[i], on_chain_released, NULL) != DLOCK_OK)
            atomic_fetch_add(&io_failures, 1);
    }
    on_rec(res, &ch->acq);
}

static void test_thousand_waiters_one_thread(void **state)
{
    (void)state;
    dlock_client *other = th_client(&srv, 0);
    chain *ch = calloc(1, sizeof(*ch));
    the_chain = many_chain = ch;
    rec_init(&ch->acq);
    rec_init(&ch->rel);
    char name[128], hold[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-many");
    new_owner(other, hold);
    dlock_lock *holder = get_as(other, name, hold);
    assert_int_equal(dlock_lock_try(holder, 0, DLOCK_WATCHDOG), DLOCK_OK);
    /* The holder's client sets up its revocation listener (a connection of
     * its own) with its first hold: let that happen before the heap is
     * measured, so that only the waiters' memory is counted. */
    int64_t tracked_by = th_now_ms() + 5000 * th_slack();
    while (dlock__watchdog_tracking(other->wd) != 2 && th_now_ms() < tracked_by)
        th_sleep_ms(5);
    for (size_t i = 0; i < MANY; i++) {
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(cli, o);
        ch->l[i] = get_as(cli, name, o);
    }
    int threads0 = threads_now();
    struct mallinfo2 m0 = mallinfo2();
    for (size_t i = 0; i < MANY; i++)
        assert_int_equal(dlock_lock_acquire_async(ch->l[i],
                                                  &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER},
                                                  on_chain_acquired, (void *)(uintptr_t)i),
                         DLOCK_OK);
    /* Every one pending, and asleep: no thread per waiter, no commands. */
    int64_t until = th_now_ms() + 10000 * th_slack();
    while (waiters_on(ch->l[0]) < MANY && th_now_ms() < until)
        th_sleep_ms(10);
    assert_int_equal(waiters_on(ch->l[0]), MANY);
    th_sleep_ms(300);   /* their retries after subscribing are answered */
    struct mallinfo2 m1 = mallinfo2();
    assert_int_equal(dlock_client_async_pending(cli), MANY);
    assert_true(threads_now() <= threads0);
    long long calls0 = th_calls(&srv, NULL);
    th_sleep_ms(1000);
    long long calls1 = th_calls(&srv, NULL);
    print_message("%d pending waiters: %.0f bytes each (heap), %lld Redis commands in 1 s while "
                  "they wait\n",
                  MANY, (double)(m1.uordblks - m0.uordblks) / MANY, calls1 - calls0);
    assert_true(calls1 - calls0 <= 5);   /* th_calls' own INFO aside, nothing */
    /* The budget: at most 1 kB of heap per pending waiter. */
    assert_true(m1.uordblks - m0.uordblks <= (size_t)MANY * 1024);
    assert_int_equal(rec_calls(&ch->acq), 0);
    /* The other client lets go: each waiter in turn holds, releases, wakes the next. */
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(rec_wait(&ch->acq, MANY, 60000), MANY);
    assert_int_equal(rec_wait(&ch->rel, MANY, 10000), MANY);
    assert_int_equal(ch->acq.ok, MANY);
    assert_int_equal(ch->rel.ok, MANY);
    assert_int_equal(atomic_load(&io_failures), 0);
    assert_int_equal(dlock_client_async_pending(cli), 0);
    int locked = 1;
    assert_int_equal(dlock_lock_is_locked(holder, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    for (size_t i = 0; i < MANY; i++)
        dlock_lock_free(ch->l[i]);
    rec_done(&ch->acq);
    rec_done(&ch->rel);
    free(ch);
    many_chain = NULL;
    dlock_lock_free(holder);
    dlock_client_close(other);
}

/* Waits of many lengths, sleeping side by side: each ends at its own
 * deadline, in deadline order (one timer serves them all). */
typedef struct ends {
    pthread_mutex_t mu;
    int order[40];
    int64_t at[40];
    int n;
} ends;

static ends the_ends;
static int64_t ends_t0;

static void on_end(const dlock_async_result *res, void *ud)
{
    int i = (int)(uintptr_t)ud;
    pthread_mutex_lock(&the_ends.mu);
    if (dlock_async_status(res) == DLOCK_ETIMEDOUT)
        the_ends.order[the_ends.n] = i;
    else
        the_ends.order[the_ends.n] = -1;
    the_ends.at[the_ends.n++] = th_now_ms() - ends_t0;
    pthread_mutex_unlock(&the_ends.mu);
}

static void test_deadlines_in_order(void **state)
{
    (void)state;
    char name[128], h[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-deadlines");
    new_owner(cli, h);
    dlock_lock *holder = get_as(cli, name, h);
    assert_int_equal(dlock_lock_try(holder, 0, DLOCK_WATCHDOG), DLOCK_OK);
    memset(&the_ends, 0, sizeof(the_ends));
    pthread_mutex_init(&the_ends.mu, NULL);
    dlock_lock *ls[40];
    ends_t0 = th_now_ms();
    /* Started in a scrambled order; waits 200, 250, ... ms apart by 50. */
    for (int k = 0; k < 40; k++) {
        int i = (k * 17) % 40;
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(cli, o);
        ls[i] = get_as(cli, name, o);
        assert_int_equal(dlock_lock_acquire_async(ls[i],
                                                  &(dlock_wait_opts){.wait_ms = 200 + 50 * i},
                                                  on_end, (void *)(uintptr_t)i),
                         DLOCK_OK);
    }
    int64_t until = th_now_ms() + (200 + 50 * 40 + 5000) * th_slack();
    for (;;) {
        pthread_mutex_lock(&the_ends.mu);
        int n = the_ends.n;
        pthread_mutex_unlock(&the_ends.mu);
        if (n == 40 || th_now_ms() > until)
            break;
        th_sleep_ms(10);
    }
    pthread_mutex_lock(&the_ends.mu);
    assert_int_equal(the_ends.n, 40);
    for (int k = 0; k < 40; k++) {
        int i = the_ends.order[k];
        assert_true(i >= 0);
        assert_true(the_ends.at[k] >= 200 + 50 * i - 5);
    }
    /* In order, give or take neighbours a loaded machine let finish together. */
    int inversions = 0;
    for (int k = 1; k < 40; k++)
        inversions += the_ends.order[k] < the_ends.order[k - 1];
    assert_true(inversions <= 3);
    pthread_mutex_unlock(&the_ends.mu);
    for (int i = 0; i < 40; i++)
        dlock_lock_free(ls[i]);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(holder);
}

/* ------------------------------------------------------ cancellation */

static void test_cancel_pending(void **state)
{
    (void)state;
    char name[128], a[DLOCK_OWNER_BUFSIZE], b[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-cancel");
    new_owner(cli, a);
    new_owner(cli, b);
    dlock_lock *la = get_as(cli, name, a), *lb = get_as(cli, name, b);
    assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    rec r;
    rec_init(&r);
    assert_int_equal(
        dlock_lock_acquire_async(
            lb, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .cancel = tok}, on_rec, &r),
        DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(rec_calls(&r), 0);
    dlock_cancel_fire(tok);
    assert_int_equal(rec_wait(&r, 1, 5000), 1);
    assert_int_equal(r.status, DLOCK_ECANCELED);
    assert_non_null(strstr(r.msg, "cancelled"));
    rec_done(&r);
    /* A fired token: a new wait on it ends at its first busy answer. */
    rec_init(&r);
    assert_int_equal(dlock_lock_acquire_async(
                         lb, &(dlock_wait_opts){.wait_ms = 5000, .cancel = tok}, on_rec, &r),
                     DLOCK_OK);
    assert_int_equal(rec_wait(&r, 1, 5000), 1);
    assert_int_equal(r.status, DLOCK_ECANCELED);
    rec_done(&r);
    int held = 1;
    assert_int_equal(dlock_lock_is_held(lb, &held), DLOCK_OK);
    assert_int_equal(held, 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    dlock_cancel_free(tok);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

/* A cancellation racing the release that wakes the waiter: one callback,
 * either DLOCK_OK (then it holds the lock) or DLOCK_ECANCELED (then not). */
static void test_cancel_races_release(void **state)
{
    (void)state;
    for (int round = 0; round < 30; round++) {
        char name[128], a[DLOCK_OWNER_BUFSIZE], b[DLOCK_OWNER_BUFSIZE];
        th_name(name, sizeof(name), "async-race");
        new_owner(cli, a);
        new_owner(cli, b);
        dlock_lock *la = get_as(cli, name, a), *lb = get_as(cli, name, b);
        assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
        dlock_cancel *tok;
        assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
        rec r;
        rec_init(&r);
        assert_int_equal(
            dlock_lock_acquire_async(
                lb, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .cancel = tok}, on_rec, &r),
            DLOCK_OK);
        th_sleep_ms(20 + round % 5);
        if (round % 2)
            dlock_cancel_fire(tok);
        assert_int_equal(dlock_lock_release(la), DLOCK_OK);
        if (!(round % 2))
            dlock_cancel_fire(tok);
        assert_int_equal(rec_wait(&r, 1, 5000), 1);
        th_sleep_ms(20);
        assert_int_equal(rec_calls(&r), 1);
        int held = -1;
        assert_int_equal(dlock_lock_is_held(lb, &held), DLOCK_OK);
        if (r.status == DLOCK_OK) {
            assert_int_equal(held, 1);
            assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
        } else {
            assert_int_equal(r.status, DLOCK_ECANCELED);
            assert_int_equal(held, 0);
        }
        rec_done(&r);
        dlock_cancel_free(tok);
        dlock_lock_free(la);
        dlock_lock_free(lb);
    }
}

/* --------------------------------------------------- close, restart */

static void test_close_with_pending_calls(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 0);
    char name[128], a[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-close");
    new_owner(cli, a);
    dlock_lock *la = get_as(cli, name, a);
    assert_int_equal(dlock_lock_try(la, 0, DLOCK_WATCHDOG), DLOCK_OK);
    enum { N = 50 };
    dlock_lock *ls[N];
    rec r;
    rec_init(&r);
    for (int i = 0; i < N; i++) {
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(c, o);
        ls[i] = get_as(c, name, o);
        assert_int_equal(dlock_lock_acquire_async(
                             ls[i], &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, on_rec, &r),
                         DLOCK_OK);
    }
    /* Some asleep, the last ones perhaps still starting: close ends them all. */
    th_sleep_ms(100);
    dlock_client_close(c);
    assert_int_equal(rec_calls(&r), N);
    assert_int_equal(r.by_status[-DLOCK_ECLOSED], N);
    th_sleep_ms(50);
    assert_int_equal(rec_calls(&r), N);
    for (int i = 0; i < N; i++)
        dlock_lock_free(ls[i]);
    rec_done(&r);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    dlock_lock_free(la);
}

/* Closed right after the calls were made: those still queued for the io
 * thread end too. */
static void test_close_right_after_calls(void **state)
{
    (void)state;
    for (int round = 0; round < 5; round++) {
        dlock_client *c = th_client(&srv, 0);
        char name[128], o[DLOCK_OWNER_BUFSIZE];
        th_name(name, sizeof(name), "async-close2");
        new_owner(c, o);
        dlock_lock *l = get_as(c, name, o);
        rec r;
        rec_init(&r);
        for (int i = 0; i < 20; i++)
            assert_int_equal(
                dlock_lock_acquire_async(l, &(dlock_wait_opts){.lease_ms = 5000}, on_rec, &r),
                DLOCK_OK);
        dlock_client_close(c);
        assert_int_equal(rec_calls(&r), 20);
        dlock_lock_free(l);
        rec_done(&r);
    }
}

typedef struct restart_ctx {
    rec acq;
    rec rel;
    dlock_lock *l[20];
} restart_ctx;

static restart_ctx *the_restart;

static void on_restart_rel(const dlock_async_result *res, void *ud)
{
    (void)ud;
    on_rec(res, &the_restart->rel);
}

static void on_restart_acq(const dlock_async_result *res, void *ud)
{
    size_t i = (size_t)(uintptr_t)ud;
    if (dlock_async_status(res) == DLOCK_OK)
        dlock_lock_release_async(the_restart->l[i], on_restart_rel, NULL);
    on_rec(res, &the_restart->acq);
}

static void test_redis_restart_with_calls_pending(void **state)
{
    (void)state;
    th_redis own;
    assert_int_equal(th_redis_start(&own, NULL), 0);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, own.url), DLOCK_OK);
    dlock_config_set_retry(cfg, 10, 200);
    dlock_client *c = NULL, *other = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    assert_int_equal(dlock_client_open(&other, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    restart_ctx *rc = calloc(1, sizeof(*rc));
    the_restart = rc;
    rec_init(&rc->acq);
    rec_init(&rc->rel);
    char name[128], h[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-restart");
    new_owner(other, h);
    dlock_lock *holder = get_as(other, name, h);
    assert_int_equal(dlock_lock_try(holder, 0, DLOCK_WATCHDOG), DLOCK_OK);
    for (size_t i = 0; i < 20; i++) {
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(c, o);
        rc->l[i] = get_as(c, name, o);
        assert_int_equal(dlock_lock_acquire_async(
                             rc->l[i], &(dlock_wait_opts){.wait_ms = 60000, .lease_ms = 10000},
                             on_restart_acq, (void *)(uintptr_t)i),
                         DLOCK_OK);
    }
    th_sleep_ms(300);
    assert_int_equal(rec_calls(&rc->acq), 0);
    /* Restarted empty: the lock is gone; the waiters learn it when pub/sub is back. */
    assert_int_equal(th_redis_restart(&own), 0);
    assert_int_equal(rec_wait(&rc->acq, 20, 60000), 20);
    th_sleep_ms(100);
    assert_int_equal(rec_calls(&rc->acq), 20);   /* each exactly once */
    print_message("after the restart: %d of 20 acquired, %d unknown, %d other\n", rc->acq.ok,
                  rc->acq.by_status[-DLOCK_EUNKNOWN],
                  20 - rc->acq.ok - rc->acq.by_status[-DLOCK_EUNKNOWN]);
    assert_true(rc->acq.ok >= 15);
    assert_int_equal(rec_wait(&rc->rel, rc->acq.ok, 10000), rc->acq.ok);
    dlock_client_close(c);
    dlock_client_close(other);
    for (size_t i = 0; i < 20; i++)
        dlock_lock_free(rc->l[i]);
    dlock_lock_free(holder);
    rec_done(&rc->acq);
    rec_done(&rc->rel);
    free(rc);
    th_redis_destroy(&own);
}

/* ------------------------------------------------------------ family */

typedef struct order {
    pthread_mutex_t mu;
    int seq[8];
    int n;
    dlock_lock *l[8];
} order;

static order the_order;

static void on_fair(const dlock_async_result *res, void *ud)
{
    int i = (int)(uintptr_t)ud;
    pthread_mutex_lock(&the_order.mu);
    if (dlock_async_status(res) == DLOCK_OK)
        the_order.seq[the_order.n++] = i;
    pthread_mutex_unlock(&the_order.mu);
    if (dlock_async_status(res) == DLOCK_OK)
        dlock_lock_release_async(the_order.l[i], on_chain_released, NULL);
}

static void test_fair_lock_order(void **state)
{
    (void)state;
    chain *ch = calloc(1, sizeof(*ch));
    the_chain = ch;
    rec_init(&ch->rel);
    memset(&the_order, 0, sizeof(the_order));
    pthread_mutex_init(&the_order.mu, NULL);
    char name[128], h[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-fair");
    new_owner(cli, h);
    dlock_lock *holder = NULL;
    assert_int_equal(dlock_fair_lock_get_as(cli, name, h, &holder), DLOCK_OK);
    assert_int_equal(dlock_lock_try(holder, 0, DLOCK_WATCHDOG), DLOCK_OK);
    for (int i = 0; i < 5; i++) {
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(cli, o);
        assert_int_equal(dlock_fair_lock_get_as(cli, name, o, &the_order.l[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire_async(the_order.l[i],
                                                  &(dlock_wait_opts){.wait_ms = 30000}, on_fair,
                                                  (void *)(uintptr_t)i),
                         DLOCK_OK);
        /* Queued in this order: wait for each to be in Redis's queue. */
        int64_t until = th_now_ms() + 5000 * th_slack();
        char q[200];
        snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
        while (th_int(&srv, "LLEN %s", q) < i + 1 && th_now_ms() < until)
            th_sleep_ms(5);
    }
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(rec_wait(&ch->rel, 5, 20000), 5);
    pthread_mutex_lock(&the_order.mu);
    assert_int_equal(the_order.n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(the_order.seq[i], i);
    pthread_mutex_unlock(&the_order.mu);
    for (int i = 0; i < 5; i++)
        dlock_lock_free(the_order.l[i]);
    dlock_lock_free(holder);
    rec_done(&ch->rel);
    free(ch);
}

static void test_read_write_locks(void **state)
{
    (void)state;
    char name[128], w1[DLOCK_OWNER_BUFSIZE], r1[DLOCK_OWNER_BUFSIZE], r2[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-rw");
    new_owner(cli, w1);
    new_owner(cli, r1);
    new_owner(cli, r2);
    dlock_lock *w = NULL, *ra = NULL, *rb = NULL;
    assert_int_equal(dlock_write_lock_get_as(cli, name, w1, &w), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get_as(cli, name, r1, &ra), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get_as(cli, name, r2, &rb), DLOCK_OK);
    rec r;
    assert_int_equal(run_acquire(w, 0, DLOCK_WATCHDOG, &r), DLOCK_OK);
    rec_done(&r);
    RUN1(r, dlock_lock_is_locked_async(w, on_rec, &r));   /* the write lock's own sense */
    assert_int_equal(r.was_locked, 1);
    RUN1(r, dlock_lock_is_locked_async(ra, on_rec, &r));
    assert_int_equal(r.was_locked, 0);
    rec_done(&r);
    /* Two readers wait for the writer; its release ("1") wakes both. */
    rec readers;
    rec_init(&readers);
    assert_int_equal(
        dlock_lock_acquire_async(ra, &(dlock_wait_opts){.wait_ms = 20000}, on_rec, &readers),
        DLOCK_OK);
    assert_int_equal(
        dlock_lock_acquire_async(rb, &(dlock_wait_opts){.wait_ms = 20000}, on_rec, &readers),
        DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(rec_calls(&readers), 0);
    assert_int_equal(run_release(w), DLOCK_OK);
    assert_int_equal(rec_wait(&readers, 2, 5000), 2);
    assert_int_equal(readers.ok, 2);
    rec_done(&readers);
    /* A writer waits for both readers. */
    rec wr;
    rec_init(&wr);
    assert_int_equal(dlock_lock_acquire_async(w, &(dlock_wait_opts){.wait_ms = 20000}, on_rec, &wr),
                     DLOCK_OK);
    th_sleep_ms(150);
    assert_int_equal(run_release(ra), DLOCK_OK);
    th_sleep_ms(150);
    assert_int_equal(rec_calls(&wr), 0);
    assert_int_equal(run_release(rb), DLOCK_OK);
    assert_int_equal(rec_wait(&wr, 1, 5000), 1);
    assert_int_equal(wr.status, DLOCK_OK);
    rec_done(&wr);
    /* A reader of the same owner asking for the write lock: EDEADLK. */
    dlock_lock *wa = NULL;
    assert_int_equal(dlock_write_lock_get_as(cli, name, r1, &wa), DLOCK_OK);
    assert_int_equal(run_release(w), DLOCK_OK);
    assert_int_equal(run_acquire(ra, 0, DLOCK_WATCHDOG, &r), DLOCK_OK);
    rec_done(&r);
    assert_int_equal(run_acquire(wa, 1000, DLOCK_WATCHDOG, &r), DLOCK_EDEADLK);
    rec_done(&r);
    assert_int_equal(run_release(ra), DLOCK_OK);
    dlock_lock_free(wa);
    dlock_lock_free(w);
    dlock_lock_free(ra);
    dlock_lock_free(rb);
}

/* -------------------------------------------------- semaphores, latch */

static void test_semaphore_async(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "async-sem");
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(s, 0), DLOCK_OK);
    rec r;
    rec_init(&r);
    assert_int_equal(dlock_semaphore_acquire_async(s, 1, NULL, on_rec, &r), DLOCK_OK);
    assert_int_equal(rec_wait(&r, 1, 5000), 1);
    assert_int_equal(r.status, DLOCK_ETIMEDOUT);
    assert_non_null(strstr(r.msg, "available"));
    rec_done(&r);
    /* Three waiters for one permit each; a release of 2 serves two of them. */
    rec w;
    rec_init(&w);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_semaphore_acquire_async(
                             s, 1, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, on_rec, &w),
                         DLOCK_OK);
    /* Options a semaphore has no use for are refused at the call, as the
     * blocking form refuses them: the callback never runs. */
    uint64_t tok = 0;
    assert_int_equal(dlock_semaphore_acquire_async(s, 1, &(dlock_wait_opts){.lease_ms = 1000},
                                                   on_rec, &w),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease_ms"));
    assert_int_equal(
        dlock_semaphore_acquire_async(s, 1, &(dlock_wait_opts){.token = &tok}, on_rec, &w),
        DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "token"));
    th_sleep_ms(200);
    assert_int_equal(rec_calls(&w), 0);
    rec g;
    rec_init(&g);
    assert_int_equal(dlock_semaphore_release_async(s, 2, on_rec, &g), DLOCK_OK);
    assert_int_equal(rec_wait(&g, 1, 5000), 1);
    assert_int_equal(g.status, DLOCK_OK);
    assert_int_equal(g.by_status[0], 1);
    assert_int_equal(rec_wait(&w, 2, 5000), 2);
    th_sleep_ms(200);
    assert_int_equal(rec_calls(&w), 2);
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 3, 5000), 3);
    assert_int_equal(w.ok, 3);
    int64_t n = -1;
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    /* Bad input is refused at the call. */
    assert_int_equal(dlock_semaphore_acquire_async(s, 0, NULL, on_rec, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_release_async(s, -1, on_rec, &r), DLOCK_EINVAL);
    rec_done(&w);
    rec_done(&g);
    dlock_semaphore_free(s);
}

static void test_permits_async(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "async-permits");
    dlock_permit_semaphore *p = NULL;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    rec q;
    RUN1(q, dlock_permit_semaphore_try_set_permits_async(p, 3, on_rec, &q));
    assert_int_equal(q.was_locked, 1);
    RUN1(q, dlock_permit_semaphore_add_permits_async(p, -1, on_rec, &q));
    assert_int_equal(q.status, DLOCK_OK);
    assert_int_equal(q.count, 2);
    RUN1(q, dlock_permit_semaphore_set_total_async(p, 1, on_rec, &q));
    assert_int_equal(q.status, DLOCK_OK);
    RUN1(q, dlock_permit_semaphore_available_async(p, on_rec, &q));
    assert_int_equal(q.count, 1);
    rec_done(&q);
    rec a;
    rec_init(&a);
    char id[DLOCK_PERMIT_ID_BUFSIZE] = "";
    assert_int_equal(dlock_permit_semaphore_acquire_async(p, NULL, on_rec, &a), DLOCK_OK);
    assert_int_equal(rec_wait(&a, 1, 5000), 1);
    assert_int_equal(a.status, DLOCK_OK);
    rec_done(&a);
    /* The id came with the result: find it the way a user would, from the hold. */
    int64_t avail = -1, held = -1;
    assert_int_equal(dlock_permit_semaphore_available(p, &avail, &held), DLOCK_OK);
    assert_int_equal(avail, 0);
    assert_int_equal(held, 1);
    /* A timed wait ends; a waiter for ever gets the permit once it is released. */
    rec t;
    rec_init(&t);
    assert_int_equal(dlock_permit_semaphore_acquire_async(
                         p, &(dlock_wait_opts){.wait_ms = 300, .lease_ms = 10000}, on_rec, &t),
                     DLOCK_OK);
    assert_int_equal(rec_wait(&t, 1, 5000), 1);
    assert_int_equal(t.status, DLOCK_ETIMEDOUT);
    rec_done(&t);
    rec_init(&t);
    assert_int_equal(
        dlock_permit_semaphore_acquire_async(
            p, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = 10000}, on_rec, &t),
        DLOCK_OK);
    th_sleep_ms(100);
    assert_int_equal(rec_calls(&t), 0);
    snprintf(id, sizeof(id), "%s", the_permit_id);
    assert_int_equal(strlen(id), 32);
    rec rel;
    rec_init(&rel);
    assert_int_equal(dlock_permit_semaphore_release_async(p, id, on_rec, &rel), DLOCK_OK);
    assert_int_equal(rec_wait(&rel, 1, 5000), 1);
    assert_int_equal(rel.status, DLOCK_OK);
    assert_int_equal(rec_wait(&t, 1, 5000), 1);
    assert_int_equal(t.status, DLOCK_OK);
    assert_string_not_equal(the_permit_id, id);
    /* Released twice: unknown. */
    rec_done(&rel);
    rec_init(&rel);
    assert_int_equal(dlock_permit_semaphore_release_async(p, id, on_rec, &rel), DLOCK_OK);
    assert_int_equal(rec_wait(&rel, 1, 5000), 1);
    assert_int_equal(rel.status, DLOCK_ENOTOWNER);
    assert_int_equal(dlock_permit_semaphore_release_async(p, "nothex", on_rec, &rel),
                     DLOCK_EINVAL);
    /* The waiter's permit: its lease moved to the watchdog, then a try-release
     * twice (held, then not: no error). */
    char id2[DLOCK_PERMIT_ID_BUFSIZE];
    snprintf(id2, sizeof(id2), "%s", the_permit_id);
    rec_done(&rel);
    size_t renewed = dlock__watchdog_count(cli->wd);
    RUN1(rel, dlock_permit_semaphore_update_lease_async(p, id2, DLOCK_WATCHDOG, on_rec, &rel));
    assert_int_equal(rel.status, DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(cli->wd), renewed + 1);   /* now renewed */
    RUN1(rel, dlock_permit_semaphore_try_release_async(p, id2, on_rec, &rel));
    assert_int_equal(rel.status, DLOCK_OK);
    assert_int_equal(rel.was_locked, 1);
    assert_int_equal(dlock__watchdog_count(cli->wd), renewed);
    RUN1(rel, dlock_permit_semaphore_try_release_async(p, id2, on_rec, &rel));
    assert_int_equal(rel.status, DLOCK_OK);
    assert_int_equal(rel.was_locked, 0);
    RUN1(rel, dlock_permit_semaphore_update_lease_async(p, id2, 5000, on_rec, &rel));
    assert_int_equal(rel.status, DLOCK_ENOTOWNER);
    rec_done(&rel);
    rec_done(&t);
    dlock_permit_semaphore_free(p);
}

static void test_one_trip_calls(void **state)
{
    (void)state;
    char name[128];
    rec r;
    th_name(name, sizeof(name), "async-sem-calls");
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    RUN1(r, dlock_semaphore_try_set_permits_async(s, 5, on_rec, &r));
    assert_int_equal(r.status, DLOCK_OK);
    assert_int_equal(r.was_locked, 1);   /* the flag: it was unset */
    RUN1(r, dlock_semaphore_try_set_permits_async(s, 7, on_rec, &r));
    assert_int_equal(r.was_locked, 0);
    RUN1(r, dlock_semaphore_available_async(s, on_rec, &r));
    assert_int_equal(r.count, 5);
    RUN1(r, dlock_semaphore_add_permits_async(s, -2, on_rec, &r));
    assert_int_equal(r.status, DLOCK_OK);
    assert_int_equal(r.count, 3);
    RUN1(r, dlock_semaphore_set_permits_async(s, 10, on_rec, &r));
    assert_int_equal(r.status, DLOCK_OK);
    RUN1(r, dlock_semaphore_drain_async(s, on_rec, &r));
    assert_int_equal(r.count, 10);
    int64_t n = -1;
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(dlock_semaphore_add_permits_async(s, 0, on_rec, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_set_permits_async(s, -1, on_rec, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_available_async(s, NULL, &r), DLOCK_EINVAL);
    /* A key of another type: the verdict comes in the callback. */
    freeReplyObject(th_cmd(&srv, "SET %s notacount", name));
    RUN1(r, dlock_semaphore_available_async(s, on_rec, &r));
    assert_int_equal(r.status, DLOCK_EWRONGTYPE);
    dlock_semaphore_free(s);

    th_name(name, sizeof(name), "async-latch-calls");
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_get(cli, name, &l), DLOCK_OK);
    RUN1(r, dlock_latch_try_set_count_async(l, 3, on_rec, &r));
    assert_int_equal(r.was_locked, 1);
    RUN1(r, dlock_latch_try_set_count_async(l, 4, on_rec, &r));
    assert_int_equal(r.was_locked, 0);
    RUN1(r, dlock_latch_count_async(l, on_rec, &r));
    assert_int_equal(r.count, 3);
    RUN1(r, dlock_latch_delete_async(l, on_rec, &r));
    assert_int_equal(r.was_locked, 1);
    RUN1(r, dlock_latch_count_async(l, on_rec, &r));
    assert_int_equal(r.status, DLOCK_OK);
    assert_int_equal(r.count, 0);
    RUN1(r, dlock_latch_delete_async(l, on_rec, &r));
    assert_int_equal(r.was_locked, 0);
    assert_int_equal(dlock_latch_try_set_count_async(l, 0, on_rec, &r), DLOCK_EINVAL);
    dlock_latch_free(l);
}

static void test_latch_async(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "async-latch");
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_get(cli, name, &l), DLOCK_OK);
    rec w;
    rec_init(&w);
    /* Zero already: done at once. */
    assert_int_equal(dlock_latch_await_async(l, NULL, on_rec, &w), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 1, 5000), 1);
    assert_int_equal(w.status, DLOCK_OK);
    rec_done(&w);
    int set = 0;
    assert_int_equal(dlock_latch_try_set_count(l, 2, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    rec_init(&w);
    assert_int_equal(dlock_latch_await_async(l, &(dlock_wait_opts){.wait_ms = 200}, on_rec, &w),
                     DLOCK_OK);
    assert_int_equal(rec_wait(&w, 1, 5000), 1);
    assert_int_equal(w.status, DLOCK_ETIMEDOUT);
    rec_done(&w);
    rec_init(&w);
    for (int i = 0; i < 10; i++)
        assert_int_equal(dlock_latch_await_async(
                             l, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, on_rec, &w),
                         DLOCK_OK);
    th_sleep_ms(200);
    rec cd;
    rec_init(&cd);
    assert_int_equal(dlock_latch_count_down_async(l, on_rec, &cd), DLOCK_OK);
    assert_int_equal(rec_wait(&cd, 1, 5000), 1);
    assert_int_equal(cd.status, DLOCK_OK);
    assert_int_equal(cd.count, 1);
    th_sleep_ms(200);
    assert_int_equal(rec_calls(&w), 0);
    assert_int_equal(dlock_latch_count_down_async(l, on_rec, &cd), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 10, 5000), 10);
    assert_int_equal(w.ok, 10);
    assert_int_equal(rec_wait(&cd, 2, 5000), 2);
    int64_t c = -1;
    assert_int_equal(dlock_latch_count(l, &c), DLOCK_OK);
    assert_int_equal(c, 0);
    rec_done(&cd);
    rec_done(&w);
    dlock_latch_free(l);
}

/* ------------------------------------------------- the program's loop */

typedef struct embed {
    uv_loop_t loop;
    uv_timer_t tick;
    pthread_t self;
    dlock_client *c;
    dlock_lock *l[100];
    int n;
    int acquired, released, other, wrong_thread, closed_calls;
    int refused_wait;
    int close_when_pending;  /* close with calls pending, after this many ticks */
    int ticks;
    dlock_client *other_client;
    dlock_lock *holder;
} embed;

static void embed_on_released(const dlock_async_result *res, void *ud)
{
    embed *e = ud;
    if (!pthread_equal(pthread_self(), e->self))
        e->wrong_thread++;
    e->released += dlock_async_status(res) == DLOCK_OK;
}

static embed *the_embed;

static void embed_on_acquired(const dlock_async_result *res, void *ud)
{
    embed *e = the_embed;
    size_t i = (size_t)(uintptr_t)ud;
    if (!pthread_equal(pthread_self(), e->self))
        e->wrong_thread++;
    int st = dlock_async_status(res);
    if (st == DLOCK_OK) {
        e->acquired++;
        if (dlock_lock_release_async(e->l[i], embed_on_released, e) != DLOCK_OK)
            e->other++;
    } else if (st == DLOCK_ECLOSED) {
        e->closed_calls++;
    } else {
        e->other++;
    }
}

static void embed_tick(uv_timer_t *t)
{
    embed *e = t->data;
    e->ticks++;
    if (e->ticks == 1) {
        /* On the loop's thread a blocking wait would stall dlock: refused. */
        e->refused_wait = dlock_lock_try(e->l[0], 100, DLOCK_WATCHDOG) == DLOCK_EINVAL;
    }
    if (e->ticks == 20 && e->holder)
        dlock_lock_release(e->holder);   /* the other client lets go (blocking, its thread) */
    int done = e->close_when_pending ? e->ticks >= e->close_when_pending
                                     : e->acquired + e->other == e->n && e->released == e->acquired;
    if (done || e->ticks > 3000) {
        dlock_client_close(e->c);   /* from the program's own callback */
        e->c = NULL;
        uv_close((uv_handle_t *)&e->tick, NULL);
    }
}

static void run_embedded(embed *e, int n, int close_after_ticks)
{
    char name[128], h[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-embed");
    memset(e, 0, sizeof(*e));
    the_embed = e;
    e->self = pthread_self();
    e->n = n;
    e->close_when_pending = close_after_ticks;
    assert_int_equal(uv_loop_init(&e->loop), 0);
    int threads0 = threads_now();
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_uv_loop(cfg, &e->loop), DLOCK_OK);
    assert_int_equal(dlock_client_open(&e->c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    assert_int_equal(threads_now(), threads0);   /* no io thread of its own */
    e->other_client = th_client(&srv, 0);
    new_owner(e->other_client, h);
    e->holder = get_as(e->other_client, name, h);
    assert_int_equal(dlock_lock_try(e->holder, 0, DLOCK_WATCHDOG), DLOCK_OK);
    for (int i = 0; i < n; i++) {
        char o[DLOCK_OWNER_BUFSIZE];
        new_owner(e->c, o);
        e->l[i] = get_as(e->c, name, o);
        assert_int_equal(dlock_lock_acquire_async(e->l[i],
                                                  &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER},
                                                  embed_on_acquired, (void *)(uintptr_t)i),
                         DLOCK_OK);
    }
    uv_timer_init(&e->loop, &e->tick);
    e->tick.data = e;
    uv_timer_start(&e->tick, embed_tick, 10, 10);
    assert_int_equal(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&e->loop), 0);   /* dlock left nothing on it */
    assert_null(e->c);
    assert_int_equal(e->wrong_thread, 0);
    assert_int_equal(e->refused_wait, 1);
    for (int i = 0; i < n; i++)
        dlock_lock_free(e->l[i]);
    int locked = 1;
    assert_int_equal(dlock_lock_is_locked(e->holder, &locked), DLOCK_OK);
    if (!close_after_ticks)
        assert_int_equal(locked, 0);
    else if (locked)
        dlock_lock_release(e->holder);
    dlock_lock_free(e->holder);
    dlock_client_close(e->other_client);
}

static void test_programs_own_loop(void **state)
{
    (void)state;
    embed *e = calloc(1, sizeof(*e));
    run_embedded(e, 100, 0);
    assert_int_equal(e->acquired, 100);
    assert_int_equal(e->released, 100);
    assert_int_equal(e->other, 0);
    free(e);
}

static void test_programs_own_loop_closed_pending(void **state)
{
    (void)state;
    embed *e = calloc(1, sizeof(*e));
    run_embedded(e, 30, 10);   /* closed before the holder lets go (tick 20) */
    assert_int_equal(e->closed_calls, 30);
    assert_int_equal(e->acquired, 0);
    free(e);
}

/* A multi-lock whose first lock is on a client embedded in the program's
 * loop, its second on the same client or (mixed) on a client with its own
 * io thread: the acquisitions started from the program's own callbacks
 * (outside dlock's turn), the releases from dlock's, go out (nothing stalls until some other event
 * turns the loop), and every callback runs on the program's thread,
 * whichever client answered last. */
typedef struct embed_ml {
    uv_loop_t loop;
    uv_timer_t deadline;     /* the only other event: the test's time is up */
    uv_async_t fin;          /* the last callback: the program closes the client */
    uv_async_t go;           /* a release's callback: the program starts the next */
    pthread_t self;
    dlock_client *c;
    dlock_multilock *ml;
    int cycles, acquired, released, other, wrong_thread;
} embed_ml;

static void embed_ml_next(embed_ml *e);

static void embed_ml_released(const dlock_async_result *res, void *ud)
{
    embed_ml *e = ud;
    e->wrong_thread += !pthread_equal(pthread_self(), e->self);
    if (dlock_async_status(res) != DLOCK_OK) {
        e->other++;
        return;
    }
    e->released++;
    uv_async_send(e->released < e->cycles ? &e->go : &e->fin);
}

static void embed_ml_acquired(const dlock_async_result *res, void *ud)
{
    embed_ml *e = ud;
    e->wrong_thread += !pthread_equal(pthread_self(), e->self);
    if (dlock_async_status(res) != DLOCK_OK) {
        e->other++;
        return;
    }
    e->acquired++;
    if (dlock_multilock_release_async(e->ml, embed_ml_released, e) != DLOCK_OK)
        e->other++;
}

static void embed_ml_next(embed_ml *e)
{
    dlock_wait_opts once = {.lease_ms = 10000};
    if (dlock_multilock_acquire_async(e->ml, &once, embed_ml_acquired, e) != DLOCK_OK)
        e->other++;
}

static void embed_ml_end(embed_ml *e)
{
    dlock_client_close(e->c);   /* from the program's own callback */
    e->c = NULL;
    uv_close((uv_handle_t *)&e->deadline, NULL);
    uv_close((uv_handle_t *)&e->fin, NULL);
    uv_close((uv_handle_t *)&e->go, NULL);
}

static void embed_ml_fin(uv_async_t *a) { embed_ml_end(a->data); }

/* The program's own callback (outside dlock's turn of the loop). */
static void embed_ml_go(uv_async_t *a) { embed_ml_next(a->data); }

static void embed_ml_deadline(uv_timer_t *t) { embed_ml_end(t->data); }

static void run_embedded_multilock(int mixed)
{
    char n1[128], n2[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(n1, sizeof(n1), "async-embed-ml1");
    th_name(n2, sizeof(n2), "async-embed-ml2");
    embed_ml *e = calloc(1, sizeof(*e));
    e->self = pthread_self();
    e->cycles = 50;
    assert_int_equal(uv_loop_init(&e->loop), 0);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_uv_loop(cfg, &e->loop), DLOCK_OK);
    assert_int_equal(dlock_client_open(&e->c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_client *oc = th_client(&srv, 0);
    new_owner(e->c, owner);
    dlock_lock *l[2] = {get_as(e->c, n1, owner), get_as(mixed ? oc : e->c, n2, owner)};
    assert_int_equal(dlock_multilock_new(l, 2, &e->ml), DLOCK_OK);
    uv_timer_init(&e->loop, &e->deadline);
    e->deadline.data = e;
    uv_timer_start(&e->deadline, embed_ml_deadline, (uint64_t)(20000 * th_slack()), 0);
    uv_async_init(&e->loop, &e->fin, embed_ml_fin);
    e->fin.data = e;
    uv_async_init(&e->loop, &e->go, embed_ml_go);
    e->go.data = e;
    embed_ml_next(e);   /* from the program's thread, before its loop runs */
    /* Nothing else wakes the loop: each call must be written by itself. */
    int64_t t0 = th_now_ms();
    assert_int_equal(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    int64_t took = th_now_ms() - t0;
    assert_null(e->c);
    assert_int_equal(e->other, 0);
    assert_int_equal(e->acquired, e->cycles);
    assert_int_equal(e->released, e->cycles);
    assert_int_equal(e->wrong_thread, 0);
    assert_true(took < 10000 * th_slack());
    assert_int_equal(th_int(&srv, "EXISTS %s", n1) + th_int(&srv, "EXISTS %s", n2), 0);
    dlock_multilock_free(e->ml);
    dlock_lock_free(l[0]);
    dlock_lock_free(l[1]);
    dlock_client_close(oc);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    free(e);
}

static void test_programs_own_loop_multilock(void **state)
{
    (void)state;
    run_embedded_multilock(0);
    run_embedded_multilock(1);
}

/* ------------------------------------------------------------ examples */

/* Runs an example against our server; its exit status and last line. */
static int run_example(const char *prog, const char *arg1, const char *arg2, char *last,
                       size_t size)
{
    int fd = -1;
    pid_t pid = arg1 ? th_spawn(&fd, prog, srv.url, arg1, arg2, NULL)
                     : th_spawn(&fd, prog, srv.url, NULL);
    char line[512];
    last[0] = '\0';
    while (th_read_line(fd, line, sizeof(line), 30000) == 0)
        snprintf(last, size, "%s", line);
    close(fd);
    return th_wait(pid, 30000);
}

static void test_examples(void **state)
{
    (void)state;
    char last[512];
#ifdef DLOCK_EXAMPLE_SERVER
    assert_int_equal(run_example(DLOCK_EXAMPLE_SERVER, "--selftest", "30", last, sizeof(last)),
                     0);
    assert_non_null(strstr(last, "answered 30 of 30, overlapping holds: 0"));
#endif
#ifdef DLOCK_EXAMPLE_RAII
    assert_int_equal(run_example(DLOCK_EXAMPLE_RAII, NULL, NULL, last, sizeof(last)), 0);
    assert_non_null(strstr(last, "3 turns, 0 overlapping, tokens growing"));
#endif
    (void)last;
    (void)run_example;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_release),
        cmocka_unit_test(test_fenced_tokens_increase),
        cmocka_unit_test(test_force_release),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_try_and_timeout),
        cmocka_unit_test(test_woken_by_other_client),
        cmocka_unit_test(test_thousand_waiters_one_thread),
        cmocka_unit_test(test_deadlines_in_order),
        cmocka_unit_test(test_cancel_pending),
        cmocka_unit_test(test_cancel_races_release),
        cmocka_unit_test(test_close_with_pending_calls),
        cmocka_unit_test(test_close_right_after_calls),
        cmocka_unit_test(test_fair_lock_order),
        cmocka_unit_test(test_read_write_locks),
        cmocka_unit_test(test_semaphore_async),
        cmocka_unit_test(test_permits_async),
        cmocka_unit_test(test_latch_async),
        cmocka_unit_test(test_one_trip_calls),
        cmocka_unit_test(test_programs_own_loop),
        cmocka_unit_test(test_programs_own_loop_closed_pending),
        cmocka_unit_test(test_programs_own_loop_multilock),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_redis_restart_with_calls_pending),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
