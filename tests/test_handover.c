/* Hand-over without a gap (dlock_lock_transfer, dlock_lock_adopt): the
 * holder passes its hold to another owner in one script, nobody else can
 * take the lock in between, and the receiver's watchdog takes the renewal
 * over with one call. */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"
#include "sync/sync.h"

#define WD 1500   /* watchdog timeout of the test's clients: renewal every 500 ms */

static long long pttl(const char *name) { return th_int(&srv, "PTTL %s", name); }

/* The hold count field `owner` has in lock `name` (0: none). */
static long long count_of(const char *name, const char *owner)
{
    redisReply *r = th_cmd(&srv, "HGET %s %s", name, owner);
    long long n = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return n;
}

/* A handle on c for a fresh owner id of c (written to id). */
static dlock_lock *handle(dlock_client *c, const char *name, char id[DLOCK_OWNER_BUFSIZE])
{
    assert_int_equal(dlock_client_new_owner_id(c, id, DLOCK_OWNER_BUFSIZE), DLOCK_OK);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get_as(c, name, id, &l), DLOCK_OK);
    return l;
}

/* ------------------------------------------------------- two clients */

/* A holds twice under its watchdog and hands over to B (another client):
 * B's field has the whole count, A's is gone, A can no longer release, and
 * A's watchdog dropped the hold without reporting a loss. B adopts with one
 * call and its watchdog renews the hold past several leases; two releases
 * free it. */
static void test_transfer_between_clients(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover");
    dlock_client *ca = th_client(&srv, WD), *cb = th_client(&srv, WD);
    dlock_lock *la = handle(ca, name, ida), *lb = handle(cb, name, idb);
    th_lost_reason = 0;
    dlock_lock_set_lost_callback(la, th_on_lost, NULL);
    dlock_lock_set_lost_callback(lb, th_on_lost, NULL);

    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(ca->wd), 1);
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_OK);
    assert_int_equal(count_of(name, ida), 0);
    assert_int_equal(count_of(name, idb), 2);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    assert_true(th_ttl_within(pttl(name), WD, 500));   /* a full lease to adopt it in */
    assert_int_equal(dlock__watchdog_count(ca->wd), 0);
    /* the giver holds nothing now */
    assert_int_equal(dlock_lock_release(la), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "nothing to hand over"));
    assert_int_equal(count_of(name, idb), 2);

    int64_t n = 0;
    assert_int_equal(dlock_lock_adopt(lb, DLOCK_WATCHDOG, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock__watchdog_count(cb->wd), 1);
    /* adopted once: a second adoption would count it twice */
    assert_int_equal(dlock_lock_adopt(lb, DLOCK_WATCHDOG, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "watchdog already"));
    /* renewed by B's watchdog past twice the lease; A reported nothing */
    th_sleep_ms(2 * WD + 500);
    assert_int_equal(count_of(name, idb), 2);
    assert_true(pttl(name) > 0);
    assert_int_equal(th_lost_reason, 0);
    int held = 0;
    assert_int_equal(dlock_lock_is_held(lb, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(cb->wd), 1);   /* one hold left, still renewed */
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock__watchdog_count(cb->wd), 0);
    assert_int_equal(th_lost_reason, 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(ca);
    dlock_client_close(cb);
}

/* A hold taken with a fixed lease: the transfer raises a shorter TTL to the
 * watchdog timeout; the receiver adopts with a lease of its own, and no
 * watchdog renews it. Between threads of one client, too. */
static void test_transfer_lease_hold(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-lease");
    dlock_client *c = th_client(&srv, WD);
    dlock_lock *la = handle(c, name, ida), *lb = handle(c, name, idb);
    assert_int_equal(dlock_lock_try(la, 0, 300), DLOCK_OK);
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_OK);
    assert_true(th_ttl_within(pttl(name), WD, 500));
    int64_t n = 0;
    assert_int_equal(dlock_lock_adopt(lb, 8000, &n), DLOCK_OK);
    assert_int_equal(n, 1);
    assert_true(th_ttl_within(pttl(name), 8000, 500));
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    /* a lease hold may be adopted again (a new lease), as extend would */
    assert_int_equal(dlock_lock_adopt(lb, 9000, &n), DLOCK_OK);
    assert_true(th_ttl_within(pttl(name), 9000, 500));
    /* a longer TTL is never lowered by the transfer */
    assert_int_equal(dlock_lock_transfer(lb, ida), DLOCK_OK);
    assert_true(th_ttl_within(pttl(name), 9000, 500));
    assert_int_equal(dlock_lock_adopt(la, 1000, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* ------------------------------------------------------- no intruder */

typedef struct intruder {
    dlock_client *c;
    const char *name;
    atomic_int stop;
    atomic_int ready;
    long tries;
    long got;
    long errors;
} intruder;

static void *intrude(void *arg)
{
    intruder *in = arg;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get(in->c, in->name, &l), DLOCK_OK);
    atomic_store(&in->ready, 1);
    while (!atomic_load(&in->stop)) {
        int rc = dlock_lock_try(l, 0, 60000);
        in->tries++;
        if (rc == DLOCK_OK) {
            in->got++;
            dlock_lock_release(l);
        } else if (rc != DLOCK_ETIMEDOUT) {
            in->errors++;
        }
    }
    dlock_lock_free(l);
    return NULL;
}

/* A third contender spins on try(0) while the lock goes A -> B -> A ...
 * 1,000 times (each a transfer then the receiver's adoption under its
 * watchdog): it never gets the lock, and every attempt of it was answered. */
static void test_no_intruder_during_handovers(void **state)
{
    (void)state;
    char name[128], id[2][DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-spin");
    dlock_client *c[2] = {th_client(&srv, WD), th_client(&srv, WD)};
    dlock_lock *l[2] = {handle(c[0], name, id[0]), handle(c[1], name, id[1])};
    intruder in = {.c = th_client(&srv, WD), .name = name};
    assert_int_equal(dlock_lock_acquire(l[0], DLOCK_WATCHDOG), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, intrude, &in), 0);
    while (!atomic_load(&in.ready))
        th_sleep_ms(1);
    int64_t start = th_now_ms();
    for (int i = 0; i < 1000; i++) {
        int from = i % 2, to = 1 - from;
        int rc = dlock_lock_transfer(l[from], id[to]);
        if (rc != DLOCK_OK)
            fail_msg("hand-over %d: %s", i, dlock_last_error());
        int64_t n = 0;
        rc = dlock_lock_adopt(l[to], DLOCK_WATCHDOG, &n);
        if (rc != DLOCK_OK || n != 1)
            fail_msg("adoption %d: %s (count %lld)", i, dlock_last_error(), (long long)n);
    }
    int64_t took = th_now_ms() - start;
    atomic_store(&in.stop, 1);
    pthread_join(t, NULL);
    print_message("1000 hand-overs in %lld ms; the intruder tried %ld times, got it %ld times\n",
                  (long long)took, in.tries, in.got);
    assert_int_equal(in.got, 0);
    assert_int_equal(in.errors, 0);
    assert_true(in.tries >= 100);   /* it did contend throughout */
    /* 1000 hand-overs end where they began: A holds, renewed by its watchdog */
    assert_int_equal(count_of(name, id[0]), 1);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    assert_int_equal(dlock__watchdog_count(c[0]->wd), 1);
    assert_int_equal(dlock__watchdog_count(c[1]->wd), 0);
    assert_int_equal(dlock_lock_release(l[0]), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    for (int i = 0; i < 2; i++) {
        dlock_lock_free(l[i]);
        dlock_client_close(c[i]);
    }
    dlock_client_close(in.c);
}

typedef struct waiter {
    dlock_lock *l;
    atomic_int got;          /* 1: acquired, -1: failed */
    int64_t at;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    int rc = dlock_lock_acquire(w->l, DLOCK_WATCHDOG);
    w->at = th_now_ms();
    atomic_store(&w->got, rc == DLOCK_OK ? 1 : -1);
    return NULL;
}

/* A waiter asleep on the lock is not woken into it by a hand-over (nothing
 * is published, the lock stays held): it gets the lock when the receiver
 * releases it. */
static void test_waiter_sleeps_through_handover(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-waiter");
    dlock_client *ca = th_client(&srv, WD), *cb = th_client(&srv, WD), *cw = th_client(&srv, WD);
    dlock_lock *la = handle(ca, name, ida), *lb = handle(cb, name, idb);
    char idw[DLOCK_OWNER_BUFSIZE];
    waiter w = {.l = handle(cw, name, idw)};
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    assert_true(th_await_lock_waiter(cw, name));
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_OK);
    assert_int_equal(dlock_lock_adopt(lb, DLOCK_WATCHDOG, NULL), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(atomic_load(&w.got), 0);
    int64_t released = th_now_ms();
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&w.got), 1);
    assert_true(w.at - released < 1000 * th_slack());   /* woken by the release */
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(ca);
    dlock_client_close(cb);
    dlock_client_close(cw);
}

/* A parent hands its hold to a worker process it starts, through an owner
 * id it gives it: the worker adopts it, its watchdog renews it past several
 * leases while the parent holds nothing; killed, it lets the lock go
 * within the watchdog timeout. */
static void test_handover_to_process(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idw[DLOCK_OWNER_BUFSIZE], wd[16], line[64];
    th_name(name, sizeof(name), "handover-proc");
    snprintf(wd, sizeof(wd), "%d", WD);
    dlock_client *c = th_client(&srv, WD);
    dlock_lock *la = handle(c, name, ida);
    assert_int_equal(dlock_client_new_owner_id(c, idw, sizeof(idw)), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_transfer(la, idw), DLOCK_OK);
    int fd;
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "adopt", srv.url, name, wd, idw, NULL);
    assert_true(pid > 0);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "adopted 1");
    th_sleep_ms(2 * WD + 500);
    assert_int_equal(count_of(name, idw), 1);   /* renewed by the worker */
    assert_int_equal(dlock_lock_release(la), DLOCK_ENOTOWNER);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    kill(pid, SIGKILL);
    th_wait(pid, 5000);
    close(fd);
    int64_t until = th_now_ms() + (WD + 1000) * th_slack();
    while (th_int(&srv, "EXISTS %s", name) != 0 && th_now_ms() < until)
        th_sleep_ms(20);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(la);
    dlock_client_close(c);
}

/* ------------------------------------------------ marker, token, async */

/* The lock-delay marker names the receiver after the hand-over, so that its
 * proper release frees the lock at once (a marker left naming the giver
 * would keep everybody out for the delay). The fencing token is unchanged. */
static void test_transfer_moves_marker_and_token(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    char marker[160];
    th_name(name, sizeof(name), "handover-delay");
    snprintf(marker, sizeof(marker), "dlock_lock_delay:{%s}", name);
    dlock_client *c = th_client(&srv, WD);
    assert_int_equal(dlock_client_new_owner_id(c, ida, sizeof(ida)), DLOCK_OK);
    assert_int_equal(dlock_client_new_owner_id(c, idb, sizeof(idb)), DLOCK_OK);
    dlock_lock *la, *lb, *other;
    assert_int_equal(dlock_fenced_lock_get_as(c, name, ida, &la), DLOCK_OK);
    assert_int_equal(dlock_fenced_lock_get_as(c, name, idb, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, name, &other), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(la, 20000), DLOCK_OK);
    uint64_t tok = 0, tok2 = 0;
    /* The marker ends 20 s after the lease it was set with (at most WD
     * left): more than 20 s from now, less what a slow machine spent since
     * (elapsed, measured around the call and the read). */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire_opts(la, &(dlock_wait_opts){.lease_ms = DLOCK_WATCHDOG,
                                                                    .token = &tok}),
                     DLOCK_OK);
    char who[DLOCK_OWNER_BUFSIZE];
    long long left = th_marker_left(&srv, marker, who, sizeof(who));
    long long elapsed = th_now_ms() - t0;
    assert_in_range(left, 20001 - elapsed, 20000 + WD);
    assert_string_equal(who, ida);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_OK);
    left = th_marker_left(&srv, marker, who, sizeof(who));
    elapsed = th_now_ms() - t0;
    assert_string_equal(who, idb);
    assert_in_range(left, 20001 - elapsed, 20000 + WD);   /* the delay still past the lease */
    assert_int_equal(dlock_lock_adopt(lb, DLOCK_WATCHDOG, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_get_token(lb, &tok2), DLOCK_OK);
    assert_int_equal(tok2, tok);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    assert_int_equal(dlock_lock_try(other, 0, 1000), DLOCK_OK);   /* free at once */
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_lock_free(other);
    dlock_client_close(c);
}

typedef struct done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int status;
    int64_t count;
} done;

static void on_done(const dlock_async_result *res, void *ud)
{
    done *d = ud;
    pthread_mutex_lock(&d->mu);
    d->status = dlock_async_status(res);
    d->count = dlock_async_count(res);
    d->n++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static int await_done(done *d, int n)
{
    int64_t until = th_now_ms() + 5000 * th_slack();
    pthread_mutex_lock(&d->mu);
    while (d->n < n && th_now_ms() < until) {
        pthread_mutex_unlock(&d->mu);
        th_sleep_ms(2);
        pthread_mutex_lock(&d->mu);
    }
    int st = d->n >= n ? d->status : -1000;
    pthread_mutex_unlock(&d->mu);
    return st;
}

/* The asynchronous forms: the new owner id copied at the call. */
static void test_transfer_async(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-async");
    dlock_client *c = th_client(&srv, WD);
    dlock_lock *la = handle(c, name, ida), *lb = handle(c, name, idb);
    done d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    char to[DLOCK_OWNER_BUFSIZE];
    strcpy(to, idb);
    assert_int_equal(dlock_lock_transfer_async(la, to, on_done, &d), DLOCK_OK);
    memset(to, 'x', sizeof(to) - 1);   /* copied: the call no longer reads it */
    assert_int_equal(await_done(&d, 1), DLOCK_OK);
    assert_int_equal(count_of(name, idb), 3);
    assert_int_equal(dlock_lock_adopt_async(lb, DLOCK_WATCHDOG, on_done, &d), DLOCK_OK);
    assert_int_equal(await_done(&d, 2), DLOCK_OK);
    assert_int_equal(d.count, 3);
    assert_int_equal(dlock__watchdog_count(c->wd), 1);
    assert_int_equal(dlock_lock_transfer_async(la, idb, on_done, &d), DLOCK_OK);
    assert_int_equal(await_done(&d, 3), DLOCK_ENOTOWNER);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* -------------------------------------------------------- refusals */

/* Bad input is refused before anything is sent, and the hold stays as it
 * was (held, renewed). */
static void test_bad_input(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-bad");
    dlock_client *c = th_client(&srv, WD);
    dlock_lock *la = handle(c, name, ida), *lb = handle(c, name, idb), *thr, *fair, *rd, *wr;
    assert_int_equal(dlock_lock_get(c, name, &thr), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(c, name, ida, &fair), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get_as(c, name, ida, &rd), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get_as(c, name, ida, &wr), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    char longid[DLOCK_OWNER_MAX + 8];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = 0;
    longid[3] = ':';
    const char *bad[] = {NULL, "", "no-colon", ida};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dlock_lock_transfer(la, bad[i]), DLOCK_EINVAL);
        assert_true(strlen(dlock_last_error()) > 0);
    }
    assert_non_null(strstr(dlock_last_error(), "caller itself"));
    assert_int_equal(dlock_lock_transfer(la, longid), DLOCK_ENAMETOOLONG);
    assert_int_equal(dlock_lock_transfer(NULL, idb), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(NULL, DLOCK_WATCHDOG, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(lb, ((int64_t)1 << 50) + 1, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(lb, -5, NULL), DLOCK_EINVAL);
    dlock_lock *kinds[] = {fair, rd, wr};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_transfer(kinds[i], idb), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "reentrant locks"));
        assert_int_equal(dlock_lock_adopt(kinds[i], DLOCK_WATCHDOG, NULL), DLOCK_EINVAL);
    }
    /* asynchronous calls need an explicit owner */
    done d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    assert_int_equal(dlock_lock_transfer_async(thr, idb, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt_async(thr, DLOCK_WATCHDOG, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(d.n, 0);
    /* nothing changed: A holds, its watchdog renews it */
    assert_int_equal(count_of(name, ida), 1);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    assert_int_equal(dlock__watchdog_count(c->wd), 1);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    dlock_lock *all[] = {la, lb, thr, fair, rd, wr};
    for (size_t i = 0; i < 6; i++)
        dlock_lock_free(all[i]);
    dlock_client_close(c);
}

/* A lock not held by the caller: nothing is handed over and nothing
 * written, whether it is free, held by another owner, or not a lock. The
 * receiver has nothing to adopt. */
static void test_transfer_not_held(void **state)
{
    (void)state;
    char name[128], ida[DLOCK_OWNER_BUFSIZE], idb[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-none");
    dlock_client *c = th_client(&srv, WD);
    dlock_lock *la = handle(c, name, ida), *lb = handle(c, name, idb);
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_adopt(lb, DLOCK_WATCHDOG, NULL), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "nothing to adopt"));
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    /* held by B: A cannot give it away */
    assert_int_equal(dlock_lock_try(lb, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_transfer(la, ida[0] == 'z' ? "y:1" : "z:1"), DLOCK_ENOTOWNER);
    assert_int_equal(count_of(name, idb), 1);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    assert_int_equal(dlock_lock_adopt(la, DLOCK_WATCHDOG, NULL), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    /* not a lock: refused, left as it is */
    freeReplyObject(th_cmd(&srv, "SET %s data", name));
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_adopt(la, 1000, NULL), DLOCK_EWRONGTYPE);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "HSET %s %s 1 mode write", name, ida));
    assert_int_equal(dlock_lock_transfer(la, idb), DLOCK_EWRONGTYPE);
    assert_int_equal(count_of(name, ida), 1);
    assert_int_equal(count_of(name, idb), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* ------------------------------------------------------------ election */

/* A leader hands leadership to a chosen successor (another client): no
 * other campaign wins in between, the successor adopts with one call and
 * leads in a higher term, announced to observers, renewed by its watchdog. */
static void test_election_handover(void **state)
{
    (void)state;
    char name[128], id2[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "handover-election");
    dlock_client *c1 = th_client(&srv, WD), *c2 = th_client(&srv, WD), *c3 = th_client(&srv, WD);
    assert_int_equal(dlock_client_new_owner_id(c2, id2, sizeof(id2)), DLOCK_OK);
    dlock_election *e1, *e2, *e3;
    assert_int_equal(dlock_election_get(c1, name, &e1), DLOCK_OK);
    assert_int_equal(dlock_election_get_as(c2, name, id2, &e2), DLOCK_OK);
    assert_int_equal(dlock_election_get(c3, name, &e3), DLOCK_OK);
    uint64_t t1 = 0, t2 = 0, seen = 0;
    assert_int_equal(dlock_election_handover(e1, id2), DLOCK_ENOTOWNER);   /* not leading */
    assert_int_equal(dlock_election_adopt(e2, &t2), DLOCK_ENOTOWNER);      /* nothing handed */
    assert_int_equal(dlock_election_campaign(e1, &(dlock_wait_opts){.token = &t1}), DLOCK_OK);
    assert_true(t1 > 0);
    /* a bad successor: refused, still leading */
    assert_int_equal(dlock_election_handover(e1, "no-colon"), DLOCK_EINVAL);
    assert_int_equal(dlock_election_term(e1), t1);
    assert_int_equal(dlock_election_handover(e1, id2), DLOCK_OK);
    assert_int_equal(dlock_election_term(e1), 0);
    /* nobody else can win meanwhile */
    assert_int_equal(dlock_election_campaign(e3, NULL), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_campaign(e1, NULL), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_adopt(e2, &t2), DLOCK_OK);
    assert_true(t2 > t1);
    assert_int_equal(dlock_election_term(e2), t2);
    char who[512];
    assert_int_equal(dlock_election_leader(e3, &seen, who, sizeof(who)), DLOCK_OK);
    assert_int_equal(seen, t2);
    assert_non_null(strstr(who, id2));
    /* again: the same term; renewed past the lease */
    uint64_t again = 0;
    assert_int_equal(dlock_election_adopt(e2, &again), DLOCK_OK);
    assert_int_equal(again, t2);
    th_sleep_ms(WD + 700);
    assert_int_equal(dlock_election_leader(e3, &seen, NULL, 0), DLOCK_OK);
    assert_int_equal(seen, t2);
    assert_int_equal(count_of(name, id2), 1);
    assert_int_equal(dlock_election_resign(e2), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_election_campaign(e3, NULL), DLOCK_OK);
    assert_int_equal(dlock_election_resign(e3), DLOCK_OK);
    dlock_election_free(e1);
    dlock_election_free(e2);
    dlock_election_free(e3);
    dlock_client_close(c1);
    dlock_client_close(c2);
    dlock_client_close(c3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transfer_between_clients),
        cmocka_unit_test(test_transfer_lease_hold),
        cmocka_unit_test(test_no_intruder_during_handovers),
        cmocka_unit_test(test_waiter_sleeps_through_handover),
        cmocka_unit_test(test_handover_to_process),
        cmocka_unit_test(test_transfer_moves_marker_and_token),
        cmocka_unit_test(test_transfer_async),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_transfer_not_held),
        cmocka_unit_test(test_election_handover),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
