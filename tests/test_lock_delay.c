/* Lock-delay (issue 25): a reentrant lock that ends without a release stays
 * closed to other owners for the delay after its lease; a lock released
 * normally is free at once; the marker beside the lock follows the
 * watchdog's renewals; Redisson's holds (which know no marker) are not
 * delayed; bad settings are refused. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fixture.h"

#define DELAY 600   /* ms, times the slack */

static dlock_client *delayed_client(int64_t delay_ms, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    if (watchdog_ms)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, watchdog_ms), DLOCK_OK);
    assert_int_equal(dlock_config_set_lock_delay(cfg, delay_ms), DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

static void marker_of(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "dlock_lock_delay:{%s}", name);
}

/* The ms a delay key has left by the server's clock: a marker's end time (its
 * value "<end ms> <owner id>"), or a set's latest entry's score. Neither has
 * a TTL: a volatile-* eviction policy never takes them with the lock. */
static long long delay_left_of(const char *key)
{
    redisReply *r = th_cmd(&srv, "TYPE %s", key);
    int zset = strcmp(r->str, "zset") == 0;
    freeReplyObject(r);
    if (!zset) {
        long long left = th_marker_left(&srv, key, NULL, 0);
        if (left == LLONG_MIN)
            fail_msg("%s: not a marker \"<end> <owner>\" without a TTL", key);
        return left;
    }
    assert_int_equal(th_int(&srv, "PTTL %s", key), -1);
    r = th_cmd(&srv, "ZRANGE %s -1 -1 WITHSCORES", key);
    assert_int_equal(r->elements, 2);
    long long end = atoll(r->element[1]->str);
    freeReplyObject(r);
    return end - th_server_ms(&srv);
}

/* A delay key renewed with its hold: more than the delay left (without
 * renewals it would have fallen below). */
static void outlives_by_delay(const char *key, int64_t delay, const char *what)
{
    long long left = delay_left_of(key);
    if (left <= delay)
        fail_msg("%s: %lld ms left after renewals, not above the delay %lld", what, left,
                 (long long)delay);
}

/* Two clients with the delay (and watchdog timeout, 0: the default), each
 * with a handle on one fresh name; *marker is its marker's key. */
typedef struct pair {
    dlock_client *a, *b;
    dlock_lock *la, *lb;
    char name[96], marker[128];
} pair;

static void pair_open(pair *p, const char *prefix, int64_t delay_ms, int64_t watchdog_ms)
{
    p->a = delayed_client(delay_ms, watchdog_ms);
    p->b = delayed_client(delay_ms, watchdog_ms);
    th_name(p->name, sizeof(p->name), prefix);
    marker_of(p->name, p->marker, sizeof(p->marker));
    assert_int_equal(dlock_lock_get(p->a, p->name, &p->la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(p->b, p->name, &p->lb), DLOCK_OK);
}

static void pair_close(pair *p)
{
    dlock_lock_free(p->la);
    dlock_lock_free(p->lb);
    dlock_client_close(p->a);
    dlock_client_close(p->b);
}

/* A holder whose lease runs out unreleased (it stopped): another owner is
 * refused until lease + delay, with a message that says why; a waiter
 * sleeps through the delay and gets the lock once it ends. */
static void test_unreleased_lock_is_delayed(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    pair p;
    pair_open(&p, "ld", delay, 0);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *name = p.name, *marker = p.marker;
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(la, 0, lease), DLOCK_OK);
    long long left = delay_left_of(marker);
    assert_true(left > delay && left <= lease + delay);
    /* a's holder "dies": no release. Past its lease the lock is free... */
    while (th_int(&srv, "EXISTS %s", name) == 1)
        th_sleep_ms(5);
    /* ...but b is refused while the delay lasts. */
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "lock-delay"));
    int64_t refused_at = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 5000 * slack, 10000 * slack), DLOCK_OK);
    int64_t got = th_now_ms();
    print_message("    lease %lld ms, delay %lld ms: refused %lld ms after the acquisition, "
                  "acquired after %lld ms\n", (long long)lease, (long long)delay,
                  (long long)(refused_at - t0), (long long)(got - t0));
    /* Not before the lease + the delay counted from a's acquisition (which
     * Redis began no earlier than t0). */
    assert_true(got - t0 >= lease + delay - 5);
    assert_true(got - t0 < lease + delay + 2000 * slack);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);   /* released: no delay left */
    pair_close(&p);
}

/* Released normally (after reentries too): free at once for the next owner,
 * the marker gone. */
static void test_released_lock_is_free_at_once(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "ld-rel", 60000, 0);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *marker = p.marker;
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);   /* reentry */
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);   /* one hold left */
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pair_close(&p);
}

/* A watchdog hold: the marker is renewed with the lock (it outlives each
 * renewal by the delay); the lock forced open (an involuntary loss for its
 * holder) is refused to others until the marker ends, but not to a holder
 * without the setting... which is a Redisson-like raw client: the marker is
 * dlock's own. */
static void test_watchdog_renews_marker(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 900 * slack, delay = 2000 * slack;
    pair p;
    pair_open(&p, "ld-wd", delay, wd);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *name = p.name, *marker = p.marker;
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(2 * wd);   /* past the first lease: renewed at least four times */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    outlives_by_delay(marker, delay, "marker");
    /* Forced open by an operator: a's hold ends without its release. */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "lock-delay"));
    /* A Redisson client knows no marker: it takes the lock at once. */
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:1 1", name), 1);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    pair_close(&p);
}

/* A Redisson holder's release (DEL + the unlock message) wakes a dlock waiter
 * with a lock-delay at once: Redisson writes no marker, so nothing delays. */
static void test_redisson_holder_not_delayed(void **state)
{
    (void)state;
    dlock_client *b = delayed_client(60000, 0);
    char name[96], ch[160];
    th_name(name, sizeof(name), "ld-rs");
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:1 1", name), 1);
    assert_int_equal(th_int(&srv, "PEXPIRE %s 30000", name), 1);
    dlock_lock *lb;
    assert_int_equal(dlock_lock_get(b, name, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_null(strstr(dlock_last_error(), "lock-delay"));   /* held, not delayed */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    th_publish(&srv, ch, "0");
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    dlock_lock_free(lb);
    dlock_client_close(b);
}

/* The owner that lost its own hold may take it again (the delay keeps out
 * the others); a handle's setting overrides the client's: another handle of
 * the same owner, without a delay of its own, writes nothing. The type's
 * delay key is "<key_prefix>:{name}"; `count` is the command that counts its
 * entries (EXISTS for a lock's marker, ZCARD for the read holds' set). */
typedef int (*lock_getter)(dlock_client *, const char *, dlock_lock **);

static void same_owner_and_per_handle(lock_getter get, const char *prefix,
                                      const char *key_prefix, const char *count)
{
    char name[96], key[160];
    th_name(name, sizeof(name), prefix);
    snprintf(key, sizeof(key), "%s:{%s}", key_prefix, name);
    dlock_lock *l, *other;
    assert_int_equal(get(cli, name, &l), DLOCK_OK);   /* the client's: off */
    assert_int_equal(get(cli, name, &other), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(l, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "%s %s", count, key), 1);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* lost */
    int rc = dlock_lock_try(l, 0, 10000);   /* the same owner */
    if (rc != DLOCK_OK)
        fail_msg("retake by the owner: %d %s", rc, dlock_last_error());
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "%s %s", count, key), 0);
    /* The other handle has no delay of its own and sends no delay key. */
    assert_int_equal(dlock_lock_try(other, 0, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "%s %s", count, key), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    /* Set after an acquisition: refused, the setting unchanged. */
    assert_int_equal(dlock_lock_set_lock_delay(l, 1000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "before the handle's first acquisition"));
    dlock_lock_free(l);
    dlock_lock_free(other);
}

static void test_same_owner_and_per_handle(void **state)
{
    (void)state;
    same_owner_and_per_handle(dlock_lock_get, "ld-own", "dlock_lock_delay", "EXISTS");
}

static void test_fair_per_handle(void **state)
{
    (void)state;
    same_owner_and_per_handle(dlock_fair_lock_get, "ldf-own", "dlock_lock_delay", "EXISTS");
}

/* The fair lock (Redisson's RFairLock) with a lock-delay: a holder whose
 * lease ran out unreleased keeps the next taker out until the delay ends,
 * and a waiter queued meanwhile keeps its place (it is the one that gets the
 * lock, before a later one); a proper release frees it at once; a Redisson
 * fair holder (plain commands: hash, queue, no marker) delays nobody. */
static void test_fair_unreleased_is_delayed(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    dlock_client *a = delayed_client(delay, 0), *b = delayed_client(delay, 0);
    char name[96], marker[128];
    th_name(name, sizeof(name), "ldf");
    marker_of(name, marker, sizeof(marker));
    dlock_lock *la, *lb;
    assert_int_equal(dlock_fair_lock_get(a, name, &la), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(b, name, &lb), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(la, 0, lease), DLOCK_OK);
    long long left = delay_left_of(marker);
    assert_true(left > delay && left <= lease + delay);
    while (th_int(&srv, "EXISTS %s", name) == 1)   /* a "died": its lease runs out */
        th_sleep_ms(5);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "lock-delay"));
    assert_int_equal(dlock_lock_try(lb, 5000 * slack, 10000 * slack), DLOCK_OK);   /* outlasts the watchdog part below */
    int64_t got = th_now_ms();
    print_message("    fair: lease %lld ms, delay %lld ms: acquired after %lld ms\n",
                  (long long)lease, (long long)delay, (long long)(got - t0));
    assert_true(got - t0 >= lease + delay - 5);
    assert_true(got - t0 < lease + delay + 2000 * slack);
    /* A watchdog hold renews the fair lock's marker with the lock. */
    {
        const int64_t wd = 900 * slack;
        dlock_client *w = delayed_client(delay, wd);
        dlock_lock *lw;
        char wname[96], wmarker[128];
        th_name(wname, sizeof(wname), "ldf-wd");
        marker_of(wname, wmarker, sizeof(wmarker));
        assert_int_equal(dlock_fair_lock_get(w, wname, &lw), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(lw, DLOCK_WATCHDOG), DLOCK_OK);
        th_sleep_ms(2 * wd);   /* past the first lease: renewed several times */
        assert_int_equal(th_int(&srv, "EXISTS %s", wname), 1);
        outlives_by_delay(wmarker, delay, "fair marker");
        assert_int_equal(dlock_lock_release(lw), DLOCK_OK);
        assert_int_equal(th_int(&srv, "EXISTS %s", wmarker), 0);
        dlock_lock_free(lw);
        dlock_client_close(w);
    }
    /* b releases properly: no marker left, a takes it at once. */
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(la, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    /* A Redisson fair holder: the hash with its field, no marker; its
     * release (DEL + the head's wake-up, here just the DEL) delays nobody. */
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:1 1", name), 1);
    assert_int_equal(th_int(&srv, "PEXPIRE %s 30000", name), 1);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_null(strstr(dlock_last_error(), "lock-delay"));
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

typedef struct fair_waiter {
    dlock_lock *l;
    int64_t wait_ms;
    int rc;
    int64_t got_at;
} fair_waiter;

static void *fair_wait(void *arg)
{
    fair_waiter *w = arg;
    w->rc = dlock_lock_try(w->l, w->wait_ms, 10000);
    w->got_at = th_now_ms();
    if (w->rc == DLOCK_OK)
        w->rc = dlock_lock_release(w->l);
    return NULL;
}

/* Queue order holds through a delay (issue 26's head rule): a waiter that
 * queued first during the delay goes first once it ends, though a later one
 * arrives while the delay lasts; a Redisson waiter queued at the head (plain
 * commands) is not kept out by the marker. */
static void test_fair_queue_order_through_delay(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = 1500 * slack;
    dlock_client *a = delayed_client(delay, 0), *b = delayed_client(delay, 0),
                 *c = delayed_client(delay, 0);
    char name[96], marker[128], queue[160];
    th_name(name, sizeof(name), "ldfq");
    marker_of(name, marker, sizeof(marker));
    snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
    dlock_lock *la, *lb, *lc;
    assert_int_equal(dlock_fair_lock_get(a, name, &la), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(b, name, &lb), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(c, name, &lc), DLOCK_OK);
    const int64_t lease = 300 * slack;
    assert_int_equal(dlock_lock_try(la, 0, lease), DLOCK_OK);
    int64_t t0 = th_now_ms();
    while (th_int(&srv, "EXISTS %s", name) == 1)   /* a "died": its lease runs out */
        th_sleep_ms(5);
    fair_waiter wb = {lb, 20000 * slack, -1, 0}, wc = {lc, 20000 * slack, -1, 0};
    pthread_t tb, tc;
    assert_int_equal(pthread_create(&tb, NULL, fair_wait, &wb), 0);
    while (th_int(&srv, "LLEN %s", queue) < 1)
        th_sleep_ms(5);
    assert_int_equal(pthread_create(&tc, NULL, fair_wait, &wc), 0);
    while (th_int(&srv, "LLEN %s", queue) < 2)
        th_sleep_ms(5);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    assert_int_equal(wb.rc, DLOCK_OK);
    assert_int_equal(wc.rc, DLOCK_OK);
    print_message("    fair queue: delay %lld ms; first waiter after %lld ms, second after "
                  "%lld ms\n", (long long)delay, (long long)(wb.got_at - t0),
                  (long long)(wc.got_at - t0));
    assert_true(wb.got_at - t0 >= lease + delay - 5);   /* not before the delay's end */
    assert_true(wb.got_at <= wc.got_at);                    /* in queue order */
    /* A Redisson waiter at the head, no dlock holder: the marker of a lost
     * dlock hold does not stop Redisson's script (it knows no marker), and
     * dlock keeps the queue's head rule: b waits behind it. */
    assert_int_equal(dlock_lock_try(la, 0, 60000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(th_int(&srv, "RPUSH %s redisson-uuid:7", queue), 1);
    assert_int_equal(th_int(&srv, "ZADD redisson_lock_timeout:{%s} %lld redisson-uuid:7", name,
                            (long long)time(NULL) * 1000 + 600000), 1);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    /* Redisson's acquire for its head: HSET + PEXPIRE, LPOP, ZREM. */
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:7 1", name), 1);
    assert_int_equal(th_int(&srv, "LREM %s 1 redisson-uuid:7", queue), 1);
    assert_int_equal(th_int(&srv, "ZREM redisson_lock_timeout:{%s} redisson-uuid:7", name), 1);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* its release */
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);   /* dlock's marker still there */
    assert_int_equal(th_int(&srv, "DEL %s", marker), 1);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_lock_free(lc);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(c);
}


/* ------------------------------------------------------ read-write lock */

/* Clients a and b with the delay, each with a read and a write handle on one
 * fresh name; *rset is the read holds' set's key. */
typedef struct rwpair {
    pair p;
    dlock_lock *ra, *rb;   /* p.la, p.lb are the write handles */
    char rset[128];
} rwpair;

static void rwpair_open(rwpair *w, const char *prefix, int64_t delay_ms, int64_t watchdog_ms)
{
    pair *p = &w->p;
    p->a = delayed_client(delay_ms, watchdog_ms);
    p->b = delayed_client(delay_ms, watchdog_ms);
    th_name(p->name, sizeof(p->name), prefix);
    marker_of(p->name, p->marker, sizeof(p->marker));
    snprintf(w->rset, sizeof(w->rset), "dlock_read_delay:{%s}", p->name);
    assert_int_equal(dlock_write_lock_get(p->a, p->name, &p->la), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(p->b, p->name, &p->lb), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(p->a, p->name, &w->ra), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(p->b, p->name, &w->rb), DLOCK_OK);
}

static void rwpair_close(rwpair *w)
{
    dlock_lock_free(w->ra);
    dlock_lock_free(w->rb);
    pair_close(&w->p);
}

/* `l` refused at once, for the lock-delay. */
static void refused_for_delay(dlock_lock *l)
{
    int rc = dlock_lock_try(l, 0, 10000);
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "lock-delay"))
        fail_msg("expected a refusal for the lock-delay: %d %s", rc, dlock_last_error());
}

/* `l` waits through the delay and gets the lock no sooner than `t0` + lease +
 * delay, and not much later. */
static void waits_out_delay(dlock_lock *l, int64_t t0, int64_t lease, int64_t delay)
{
    const int64_t slack = th_slack();
    int rc = dlock_lock_try(l, 5000 * slack, 10000);
    if (rc != DLOCK_OK)
        fail_msg("wait through the delay: %d %s", rc, dlock_last_error());
    int64_t got = th_now_ms() - t0;
    print_message("    lease %lld ms, delay %lld ms: acquired after %lld ms\n", (long long)lease,
                  (long long)delay, (long long)got);
    assert_true(got >= lease + delay - 5);
    assert_true(got < lease + delay + 2000 * slack);
}

/* A writer whose lease runs out unreleased delays everyone: readers and
 * writers of other owners are refused until lease + delay; a waiting writer
 * gets it when the delay ends; its release clears the marker. */
static void test_rw_writer_unreleased_delays_all(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    rwpair w;
    rwpair_open(&w, "ldw", delay, 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(w.p.la, 0, lease), DLOCK_OK);
    long long left = delay_left_of(w.p.marker);
    assert_true(left > delay && left <= lease + delay);
    while (th_int(&srv, "EXISTS %s", w.p.name) == 1)
        th_sleep_ms(5);
    refused_for_delay(w.rb);
    refused_for_delay(w.p.lb);
    waits_out_delay(w.rb, t0, lease, delay);   /* a reader waits it out too */
    assert_int_equal(dlock_lock_release(w.rb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(w.p.lb, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w.p.lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", w.p.marker), 0);
    rwpair_close(&w);
}

/* A reader whose lease runs out unreleased delays writers only: another
 * reader comes in at once, a writer is refused until lease + delay (even once
 * the other reader has released properly) and a waiting writer gets it then. */
static void test_rw_reader_unreleased_delays_writers(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    rwpair w;
    rwpair_open(&w, "ldr", delay, 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(w.ra, 0, lease), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", w.rset), 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", w.p.marker), 0);   /* readers: no marker */
    while (th_int(&srv, "EXISTS %s", w.p.name) == 1)
        th_sleep_ms(5);
    int64_t t1 = th_now_ms();
    assert_int_equal(dlock_lock_try(w.rb, 0, 10000), DLOCK_OK);   /* readers do not wait */
    assert_true(th_now_ms() - t1 < 1000 * slack);
    assert_int_equal(dlock_lock_release(w.rb), DLOCK_OK);
    refused_for_delay(w.p.lb);
    waits_out_delay(w.p.lb, t0, lease, delay);
    assert_int_equal(dlock_lock_release(w.p.lb), DLOCK_OK);
    rwpair_close(&w);
}

/* Released properly (reentries too, and a writer's own read holds): the
 * other owner's writer gets it at once; no marker or entry is left. */
static void test_rw_released_free_at_once(void **state)
{
    (void)state;
    rwpair w;
    rwpair_open(&w, "ldr-rel", 60000, 0);
    assert_int_equal(dlock_lock_acquire(w.ra, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(w.ra, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w.ra), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", w.rset), 1);   /* one read hold left */
    assert_int_equal(dlock_lock_release(w.ra), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", w.rset), 0);
    assert_int_equal(dlock_lock_acquire(w.p.la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w.p.la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(w.ra, 0, 10000), DLOCK_OK);   /* the writer reads */
    assert_int_equal(dlock_lock_release(w.p.la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", w.p.marker), 1);   /* one write hold left */
    assert_int_equal(dlock_lock_release(w.p.la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", w.p.marker), 0);
    assert_int_equal(dlock_lock_release(w.ra), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(w.p.lb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(w.p.lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", w.rset), 0);
    rwpair_close(&w);
}

/* Watchdog holds: a read hold's entry and a write hold's marker are renewed
 * with the lock (each outlives it by the delay); forced open (an involuntary
 * loss), the lock is refused to the other owner's writer, not its reader. */
static void test_rw_watchdog_renews_delay(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 900 * slack, delay = 2000 * slack;
    rwpair w;
    rwpair_open(&w, "ldr-wd", delay, wd);
    const char *name = w.p.name;
    assert_int_equal(dlock_lock_acquire(w.ra, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(2 * wd);   /* past the first lease: renewed several times */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    outlives_by_delay(w.rset, delay, "read set");
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* forced open */
    refused_for_delay(w.p.lb);
    assert_int_equal(dlock_lock_try(w.rb, 0, 10000), DLOCK_OK);   /* a reader comes in */
    assert_int_equal(dlock_lock_release(w.rb), DLOCK_OK);
    assert_int_not_equal(dlock_lock_release(w.ra), DLOCK_OK);   /* a's hold is gone */
    /* Once that delay is over, a's write hold: its marker is renewed too. */
    assert_int_equal(dlock_lock_acquire_opts(w.p.la, &(dlock_wait_opts){
                                                        .wait_ms = 10000 * slack}),
                     DLOCK_OK);
    th_sleep_ms(2 * wd);
    outlives_by_delay(w.p.marker, delay, "marker");
    assert_int_equal(dlock_lock_release(w.p.la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", w.p.marker), 0);
    rwpair_close(&w);
}

/* A Redisson holder's release (DEL + its unlock message) wakes a delayed
 * dlock writer at once: Redisson writes no marker. */
static void test_rw_redisson_holder_not_delayed(void **state)
{
    (void)state;
    dlock_client *b = delayed_client(60000, 0);
    char name[96], ch[160];
    th_name(name, sizeof(name), "ldr-rs");
    snprintf(ch, sizeof(ch), "redisson_rwlock:{%s}", name);
    assert_int_equal(th_int(&srv, "HSET %s mode write redisson-uuid:1:write 1", name), 2);
    assert_int_equal(th_int(&srv, "PEXPIRE %s 30000", name), 1);
    dlock_lock *wb, *rb;
    assert_int_equal(dlock_write_lock_get(b, name, &wb), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(b, name, &rb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(wb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_null(strstr(dlock_last_error(), "lock-delay"));   /* held, not delayed */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    th_publish(&srv, ch, "1");
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(rb, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(rb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(wb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(wb), DLOCK_OK);
    dlock_lock_free(wb);
    dlock_lock_free(rb);
    dlock_client_close(b);
}

static void test_write_per_handle(void **state)
{
    (void)state;
    same_owner_and_per_handle(dlock_write_lock_get, "ldw-own", "dlock_lock_delay", "EXISTS");
}

/* A read handle's own setting: its holds enter the set dlock_read_delay:{name}. */
static void test_read_per_handle(void **state)
{
    (void)state;
    same_owner_and_per_handle(dlock_read_lock_get, "ldr-own", "dlock_read_delay", "ZCARD");
}

static void test_bad_settings(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_lock_delay(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(cfg, 86400001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(NULL, 10), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(cfg, 86400000), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *l, *f;
    assert_int_equal(dlock_lock_get(cli, "ld:bad", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(l, -5), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_set_lock_delay(NULL, 5), DLOCK_EINVAL);
    assert_int_equal(dlock_read_lock_get(cli, "ld:rw", &f), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(f, 86400001), DLOCK_EINVAL);
    /* A read holds' set of another type: refused, nothing written. */
    assert_int_equal(dlock_lock_set_lock_delay(f, 1000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "RPUSH dlock_read_delay:{ld:rw} x"), 1);
    assert_int_equal(dlock_lock_try(f, 0, 10000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS ld:rw"), 0);
    assert_int_equal(th_int(&srv, "DEL dlock_read_delay:{ld:rw}"), 1);
    /* A marker key of another type: refused, nothing written. */
    assert_int_equal(dlock_lock_set_lock_delay(l, 1000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "RPUSH dlock_lock_delay:{ld:bad} x"), 1);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS ld:bad"), 0);
    assert_int_equal(th_int(&srv, "DEL dlock_lock_delay:{ld:bad}"), 1);
    dlock_lock_free(l);
    dlock_lock_free(f);
}

/* ------------------------------------------- permit-expirable semaphore */

/* Two clients with the delay (and watchdog timeout), each with a handle on
 * one fresh permit semaphore of `permits`; its leases key and delay set. */
typedef struct ppair {
    dlock_client *a, *b;
    dlock_permit_semaphore *pa, *pb;
    char name[96], leases[128], pset[128];
} ppair;

static void ppair_open(ppair *p, const char *prefix, int64_t delay_ms, int64_t watchdog_ms,
                       int64_t permits)
{
    p->a = delayed_client(delay_ms, watchdog_ms);
    p->b = delayed_client(delay_ms, watchdog_ms);
    th_name(p->name, sizeof(p->name), prefix);
    snprintf(p->leases, sizeof(p->leases), "{%s}:timeout", p->name);
    snprintf(p->pset, sizeof(p->pset), "dlock_permit_delay:{%s}", p->name);
    assert_int_equal(dlock_permit_semaphore_get(p->a, p->name, &p->pa), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(p->b, p->name, &p->pb), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p->pa, permits, NULL), DLOCK_OK);
}

static void ppair_close(ppair *p)
{
    dlock_permit_semaphore_free(p->pa);
    dlock_permit_semaphore_free(p->pb);
    dlock_client_close(p->a);
    dlock_client_close(p->b);
}

/* Refused at once because of a lock-delay. */
static void permit_refused_for_delay(dlock_permit_semaphore *p, int64_t n)
{
    char ids[2][DLOCK_PERMIT_ID_BUFSIZE];
    int rc = dlock_permit_semaphore_try_n(p, n, 0, 10000, ids);
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "lock-delay"))
        fail_msg("%lld permits in a lock-delay: %d %s", (long long)n, rc, dlock_last_error());
}

/* A permit whose lease runs out unreleased is not given out again until the
 * delay after its lease ends (a waiter gets it then); the semaphore's other
 * permits are given out as ever. */
static void test_permit_unreleased_is_delayed(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    ppair p;
    ppair_open(&p, "ldp", delay, 0, 3);
    char lost[DLOCK_PERMIT_ID_BUFSIZE], kept[DLOCK_PERMIT_ID_BUFSIZE], id[DLOCK_PERMIT_ID_BUFSIZE];
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_try(p.pa, 0, lease, lost, sizeof(lost)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p.pa, 0, 60000, kept, sizeof(kept)), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 2);
    th_sleep_ms(lease + 50);   /* a's first permit is lost: never released */
    int64_t avail = -1;
    assert_int_equal(dlock_permit_semaphore_available(p.pb, &avail, NULL), DLOCK_OK);
    assert_int_equal(avail, 2);   /* back in the count, as Redisson's clients see it */
    /* The permit never taken is given out at once; the lost one is not. */
    assert_int_equal(dlock_permit_semaphore_try(p.pb, 0, 10000, id, sizeof(id)), DLOCK_OK);
    permit_refused_for_delay(p.pb, 1);
    assert_int_equal(dlock_permit_semaphore_release(p.pb, id), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p.pb, 0, 10000, id, sizeof(id)), DLOCK_OK);
    int64_t refused_at = th_now_ms();
    char id2[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_try(p.pb, 5000 * slack, 10000, id2, sizeof(id2)),
                     DLOCK_OK);
    int64_t got = th_now_ms();
    print_message("    lease %lld ms, delay %lld ms: refused %lld ms after the acquisition, "
                  "acquired after %lld ms\n", (long long)lease, (long long)delay,
                  (long long)(refused_at - t0), (long long)(got - t0));
    assert_true(got - t0 >= lease + delay - 5);
    assert_true(got - t0 < lease + delay + 2000 * slack);
    const char *back[] = {id, id2, kept};
    assert_int_equal(dlock_permit_semaphore_release(p.pa, kept), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release_list(p.pb, back, 2), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 0);   /* released: no entries left */
    ppair_close(&p);
}

/* Released (one by one, or as a list, and through a handle without the
 * setting): back at once, the entries gone. */
static void test_permit_released_back_at_once(void **state)
{
    (void)state;
    ppair p;
    ppair_open(&p, "ldp-rel", 60000, 0, 1);
    char id[1][DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *plain;   /* the fixture's client: no delay */
    assert_int_equal(dlock_permit_semaphore_get(cli, p.name, &plain), DLOCK_OK);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(dlock_permit_semaphore_acquire(p.pa, DLOCK_WATCHDOG, id[0],
                                                        sizeof(id[0])),
                         DLOCK_OK);
        assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 1);
        const char *one[] = {id[0]};
        int rc = round == 0   ? dlock_permit_semaphore_release(p.pa, id[0])
                 : round == 1 ? dlock_permit_semaphore_release_list(p.pa, one, 1)
                              : dlock_permit_semaphore_release(plain, id[0]);
        assert_int_equal(rc, DLOCK_OK);
        assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 0);
        int64_t t0 = th_now_ms();
        assert_int_equal(dlock_permit_semaphore_try_n(p.pb, 1, 0, 10000, id), DLOCK_OK);
        assert_true(th_now_ms() - t0 < 1000 * th_slack());
        assert_int_equal(dlock_permit_semaphore_release(p.pb, id[0]), DLOCK_OK);
    }
    dlock_permit_semaphore_free(plain);
    ppair_close(&p);
}

/* n permits at once: refused while fewer than n are out of every delay,
 * taken when the delays have ended. */
static void test_permit_acquire_n_respects_delay(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    ppair p;
    ppair_open(&p, "ldp-n", delay, 0, 3);
    char ids[2][DLOCK_PERMIT_ID_BUFSIZE], one[1][DLOCK_PERMIT_ID_BUFSIZE];
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_try_n(p.pa, 2, 0, lease, ids), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 2);
    th_sleep_ms(lease + 50);   /* both lost */
    permit_refused_for_delay(p.pb, 2);   /* 3 in the count, 1 usable */
    assert_int_equal(dlock_permit_semaphore_try_n(p.pb, 1, 0, 10000, one), DLOCK_OK);
    permit_refused_for_delay(p.pb, 1);
    assert_int_equal(dlock_permit_semaphore_release(p.pb, one[0]), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_n(p.pb, 2, 5000 * slack, 10000, ids), DLOCK_OK);
    int64_t got = th_now_ms();
    assert_true(got - t0 >= lease + delay - 5);
    assert_true(got - t0 < lease + delay + 2000 * slack);
    const char *back[] = {ids[0], ids[1]};
    assert_int_equal(dlock_permit_semaphore_release_list(p.pb, back, 2), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 0);
    ppair_close(&p);
}

/* A watchdog permit: its entry is renewed with it (the set outlives each
 * renewal by the delay); the permit taken away (an involuntary loss) is
 * not given out while the entry lives. An update of the lease moves the
 * entry too. */
static void test_permit_watchdog_renews_entry(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 900 * slack, delay = 2000 * slack;
    ppair p;
    ppair_open(&p, "ldp-wd", delay, wd, 1);
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_acquire(p.pa, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_OK);
    th_sleep_ms(2 * wd);   /* past the first lease: renewed several times */
    assert_int_equal(th_int(&srv, "ZCARD %s", p.leases), 1);
    outlives_by_delay(p.pset, delay, "delay set");
    /* A longer fixed lease: the entry follows it. */
    assert_int_equal(dlock_permit_semaphore_update_lease(p.pa, id, 30000), DLOCK_OK);
    long long left = delay_left_of(p.pset);
    assert_true(left > 30000 && left <= 30000 + delay);
    /* Taken away by an operator (the lease ended for its holder). */
    assert_int_equal(th_int(&srv, "DEL %s", p.leases), 1);
    assert_int_equal(th_int(&srv, "INCR %s", p.name), 1);
    permit_refused_for_delay(p.pb, 1);
    ppair_close(&p);
}

/* A Redisson client's permit (plain commands in its layout: no entry) whose
 * lease runs out is given to a dlock acquirer with a delay at once; a
 * Redisson-layout acquirer takes a dlock permit in its delay (it reads no
 * set: the delay binds dlock's clients only). */
static void test_permit_redisson_not_delayed(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    ppair p;
    ppair_open(&p, "ldp-rs", 60000, 0, 0);
    assert_int_equal(th_int(&srv, "ZADD %s %lld redisson-permit1", p.leases,
                            th_server_ms(&srv) + 200 * slack), 1);
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_try(p.pb, 5000 * slack, 10000, id, sizeof(id)),
                     DLOCK_OK);
    assert_true(th_now_ms() - t0 < 200 * slack + 1000 * slack);   /* not 60 s */
    assert_int_equal(th_int(&srv, "ZCARD %s", p.pset), 1);   /* b's own */
    /* b's permit lost: Redisson's sweep (the same commands) puts it back, and
     * its acquire (DECR + ZADD) takes it. */
    assert_int_equal(th_int(&srv, "DEL %s", p.leases), 1);
    assert_int_equal(th_int(&srv, "INCR %s", p.name), 1);
    permit_refused_for_delay(p.pa, 1);
    assert_int_equal(th_int(&srv, "DECR %s", p.name), 0);
    assert_int_equal(th_int(&srv, "ZADD %s %lld redisson-permit2", p.leases,
                            th_server_ms(&srv) + 10000), 1);
    ppair_close(&p);
}

/* A handle's own setting: its permits get entries, another handle of the
 * same client writes none; set after an acquisition, or out of range:
 * refused. A delay set of another type: refused, nothing taken. */
static void test_permit_per_handle(void **state)
{
    (void)state;
    char name[96], pset[128];
    th_name(name, sizeof(name), "ldp-own");
    snprintf(pset, sizeof(pset), "dlock_permit_delay:{%s}", name);
    dlock_permit_semaphore *s, *other;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &s), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &other), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(s, 2, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_lock_delay(s, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_set_lock_delay(s, 86400001), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_set_lock_delay(NULL, 10), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_set_lock_delay(s, 60000), DLOCK_OK);
    char a[DLOCK_PERMIT_ID_BUFSIZE], b[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_try(s, 0, 10000, a, sizeof(a)), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", pset), 1);
    assert_int_equal(dlock_permit_semaphore_try(other, 0, 10000, b, sizeof(b)), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s", pset), 1);   /* no delay: no entry */
    assert_int_equal(dlock_permit_semaphore_set_lock_delay(s, 1000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "before the handle's first acquisition"));
    assert_int_equal(dlock_permit_semaphore_release(other, b), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(s, a), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", pset), 0);
    /* The set of another type: refused, nothing written. */
    assert_int_equal(th_int(&srv, "RPUSH %s x", pset), 1);
    assert_int_equal(dlock_permit_semaphore_try(s, 0, 10000, a, sizeof(a)), DLOCK_EWRONGTYPE);
    int64_t avail = -1;
    assert_int_equal(dlock_permit_semaphore_available(other, &avail, NULL), DLOCK_OK);
    assert_int_equal(avail, 2);
    assert_int_equal(th_int(&srv, "DEL %s", pset), 1);
    dlock_permit_semaphore_free(s);
    dlock_permit_semaphore_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreleased_lock_is_delayed),
        cmocka_unit_test(test_released_lock_is_free_at_once),
        cmocka_unit_test(test_watchdog_renews_marker),
        cmocka_unit_test(test_redisson_holder_not_delayed),
        cmocka_unit_test(test_same_owner_and_per_handle),
        cmocka_unit_test(test_fair_unreleased_is_delayed),
        cmocka_unit_test(test_fair_queue_order_through_delay),
        cmocka_unit_test(test_fair_per_handle),
        cmocka_unit_test(test_rw_writer_unreleased_delays_all),
        cmocka_unit_test(test_rw_reader_unreleased_delays_writers),
        cmocka_unit_test(test_rw_released_free_at_once),
        cmocka_unit_test(test_rw_watchdog_renews_delay),
        cmocka_unit_test(test_rw_redisson_holder_not_delayed),
        cmocka_unit_test(test_write_per_handle),
        cmocka_unit_test(test_read_per_handle),
        cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_permit_unreleased_is_delayed),
        cmocka_unit_test(test_permit_released_back_at_once),
        cmocka_unit_test(test_permit_acquire_n_respects_delay),
        cmocka_unit_test(test_permit_watchdog_renews_entry),
        cmocka_unit_test(test_permit_redisson_not_delayed),
        cmocka_unit_test(test_permit_per_handle),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
