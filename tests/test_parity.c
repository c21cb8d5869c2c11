/* Redisson parity, the last mile (issue 26): the fenced lock (Redisson's
 * RFencedLock) and getToken; the extension of a lease hold; several permits
 * of a permit-expirable semaphore in one call, and a permit's lease left.
 * Redisson's side is played by Redis commands in its layout. */
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
#include "proxy.h"
#include "sync/sync.h"

static uint64_t token_of(dlock_lock *l)
{
    uint64_t t = 0;
    assert_int_equal(dlock_lock_get_token(l, &t), DLOCK_OK);
    return t;
}

static long long pttl(const char *name) { return th_int(&srv, "PTTL %s", name); }

/* ------------------------------------------------------------ fenced lock */

/* Every acquisition through a fenced handle raises the token, reentry and a
 * plain acquire or try included; getToken reads it without taking the lock;
 * a plain lock handle's acquisitions leave it alone. */
static void test_fenced_lock_counts_every_acquisition(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fenced");
    dlock_lock *f, *g, *plain;
    assert_int_equal(dlock_fenced_lock_get(cli, name, &f), DLOCK_OK);
    assert_int_equal(dlock_fenced_lock_get_as(cli, name, "other-owner:1", &g), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &plain), DLOCK_OK);
    assert_int_equal(token_of(f), 0);   /* never given */
    assert_int_equal(dlock_lock_acquire(f, DLOCK_WATCHDOG), DLOCK_OK);
    uint64_t t1 = token_of(f);
    assert_true(t1 > 0);
    assert_int_equal(dlock_lock_try(f, 0, 5000), DLOCK_OK);   /* reentry */
    uint64_t t2 = token_of(f);
    assert_true(t2 > t1);
    assert_int_equal(token_of(plain), t2);   /* any handle reads it */
    /* A refused try raises nothing. */
    assert_int_equal(dlock_lock_try(g, 0, 5000), DLOCK_ETIMEDOUT);
    assert_int_equal(token_of(g), t2);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    assert_int_equal(dlock_lock_try(g, 1000, 5000), DLOCK_OK);
    uint64_t t3 = token_of(g);
    assert_true(t3 > t2);
    uint64_t direct = 0;
    assert_int_equal(dlock_lock_acquire_opts(g, &(dlock_wait_opts){.lease_ms = 5000, .token = &direct}), DLOCK_OK);
    assert_true(direct > t3);
    assert_int_equal(token_of(g), direct);
    assert_int_equal(dlock_lock_release(g), DLOCK_OK);
    assert_int_equal(dlock_lock_release(g), DLOCK_OK);
    /* The plain handle: no token counted. */
    assert_int_equal(dlock_lock_acquire(plain, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(token_of(plain), direct);
    assert_int_equal(dlock_lock_release(plain), DLOCK_OK);
    dlock_lock_free(f);
    dlock_lock_free(g);
    dlock_lock_free(plain);
}

/* Redisson's RFencedLock on the same name, played by its commands: its
 * acquisition INCRs the counter (HINCRBY + PEXPIRE the hash); dlock's next
 * token is above it, and Redisson's getToken (GET) reads dlock's. */
static void test_fenced_lock_with_redisson(void **state)
{
    (void)state;
    char name[128], tk[200];
    th_name(name, sizeof(name), "fenced-rd");
    snprintf(tk, sizeof(tk), "redisson_lock_token:{%s}", name);
    dlock_lock *f;
    assert_int_equal(dlock_fenced_lock_get(cli, name, &f), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(f, 5000), DLOCK_OK);
    uint64_t mine = token_of(f);
    redisReply *r = th_cmd(&srv, "GET %s", tk);   /* Redisson's getToken */
    assert_int_equal(strtoull(r->str, NULL, 10), mine);
    freeReplyObject(r);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    /* Redisson takes it: INCR, HINCRBY, PEXPIRE; then unlocks (DEL). */
    long long rt = th_int(&srv, "INCR %s", tk);
    assert_true((uint64_t)rt == mine + 1);
    freeReplyObject(th_cmd(&srv, "HINCRBY %s 9b2f0c3e-0000-4000-8000-000000000007:3 1", name));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 30000", name));
    assert_int_equal(token_of(f), (uint64_t)rt);
    assert_int_equal(dlock_lock_try(f, 0, 5000), DLOCK_ETIMEDOUT);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    assert_int_equal(dlock_lock_try(f, 0, 5000), DLOCK_OK);
    assert_true(token_of(f) > (uint64_t)rt);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    dlock_lock_free(f);
}

static void test_get_token_bad_input(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "fenced-bad");
    dlock_lock *f;
    uint64_t t = 7;
    assert_int_equal(dlock_lock_get_token(NULL, &t), DLOCK_EINVAL);
    assert_int_equal(dlock_fenced_lock_get(cli, name, &f), DLOCK_OK);
    assert_int_equal(dlock_lock_get_token(f, NULL), DLOCK_EINVAL);
    freeReplyObject(th_cmd(&srv, "RPUSH redisson_lock_token:{%s} x", name));
    assert_int_equal(dlock_lock_get_token(f, &t), DLOCK_EWRONGTYPE);
    /* and the fenced acquire refuses it, writing nothing */
    assert_int_equal(dlock_lock_try(f, 0, 5000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    freeReplyObject(th_cmd(&srv, "DEL redisson_lock_token:{%s}", name));
    freeReplyObject(th_cmd(&srv, "SET redisson_lock_token:{%s} abc", name));
    assert_int_equal(dlock_lock_get_token(f, &t), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "no number"));
    freeReplyObject(th_cmd(&srv, "DEL redisson_lock_token:{%s}", name));
    dlock_lock_free(f);
    assert_int_equal(dlock_fenced_lock_get_as(cli, name, NULL, &f), DLOCK_EINVAL);
    assert_null(f);
    assert_int_equal(dlock_fenced_lock_get(cli, "", &f), DLOCK_EINVAL);
}

/* ----------------------------------------------------------------- extend */

static void test_extend_lease_hold(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "extend");
    dlock_lock *f, *other;
    assert_int_equal(dlock_fenced_lock_get(cli, name, &f), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli, name, "other-owner:1", &other), DLOCK_OK);
    assert_int_equal(dlock_lock_try(f, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(f, 0, 1000), DLOCK_OK);
    uint64_t tok = token_of(f);
    assert_true(pttl(name) <= 1000);
    assert_int_equal(dlock_lock_extend(f, 60000), DLOCK_OK);
    assert_true(pttl(name) > 50000);
    int64_t n = 0;
    assert_int_equal(dlock_lock_hold_count(f, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(token_of(f), tok);   /* token unchanged */
    /* shorter works too: the TTL is the new lease from now */
    assert_int_equal(dlock_lock_extend(f, 20000), DLOCK_OK);
    assert_true(pttl(name) > 10000 && pttl(name) <= 20000);
    /* another owner: refused, nothing changed */
    assert_int_equal(dlock_lock_extend(other, 90000), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "not held by the caller"));
    assert_true(pttl(name) <= 20000);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    /* released: not the owner any more */
    assert_int_equal(dlock_lock_extend(f, 60000), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    /* a hold that expired is gone likewise */
    assert_int_equal(dlock_lock_try(f, 0, 50), DLOCK_OK);
    th_sleep_ms(150);
    assert_int_equal(dlock_lock_extend(f, 60000), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(f);
    dlock_lock_free(other);
}

/* The fair lock's hold is extended the same way; its queue is untouched;
 * a watchdog hold of it is refused likewise. */
static void test_extend_fair(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "extend-fair");
    dlock_lock *l;
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, 60000), DLOCK_OK);
    assert_true(pttl(name) > 50000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, 600000), DLOCK_EINVAL);
    assert_true(pttl(name) <= 30000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A watchdog renewal already on its way when the release returns must not
 * land after the owner's next hold of the same name and stretch it to the
 * watchdog timeout. A proxy holds the renewal script's request back (only
 * the watchdog's connection sends it) while the release and a 4 s lease
 * hold of the same owner go by: that hold keeps its 4 s, not 9. */
static void test_extend_bad_input(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "extend-bad");
    dlock_lock *l, *rd, *wd;
    assert_int_equal(dlock_lock_extend(NULL, 1000), DLOCK_EINVAL);
    /* a watchdog hold: refused, its TTL left to the watchdog (the same name
     * next: test_renewal_in_flight_at_release) */
    assert_int_equal(dlock_lock_get(cli, name, &wd), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(wd, DLOCK_WATCHDOG), DLOCK_OK);
    long long before = pttl(name);
    assert_int_equal(dlock_lock_extend(wd, 600000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "watchdog"));
    assert_true(pttl(name) <= before);
    assert_int_equal(dlock_lock_release(wd), DLOCK_OK);
    dlock_lock_free(wd);
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(l, -5), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(l, DLOCK_WATCHDOG), DLOCK_EINVAL);
    assert_true(pttl(name) <= 1000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* a key of another type: WRONGTYPE, nothing changed */
    freeReplyObject(th_cmd(&srv, "SET %s plain", name));
    assert_int_equal(dlock_lock_extend(l, 60000), DLOCK_EWRONGTYPE);
    assert_int_equal(pttl(name), -1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    /* a read-write lock's handle or hash */
    assert_int_equal(dlock_read_lock_get(cli, name, &rd), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(rd, 60000), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_try(rd, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, 60000), DLOCK_EWRONGTYPE);
    assert_true(pttl(name) <= 1000);
    assert_int_equal(dlock_lock_release(rd), DLOCK_OK);
    dlock_lock_free(rd);
    dlock_lock_free(l);
}

/* ------------------------------------------------------ several permits */

typedef char permit_buf[DLOCK_PERMIT_ID_BUFSIZE];

static void sem_counts(dlock_permit_semaphore *p, int64_t want_avail, int64_t want_held)
{
    int64_t n = -1, held = -1;
    assert_int_equal(dlock_permit_semaphore_available(p, &n, &held), DLOCK_OK);
    assert_int_equal(n, want_avail);
    assert_int_equal(held, want_held);
}

static void hex_to_raw(const char *hex, char raw[16])
{
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        raw[i] = (char)v;
    }
}

/* n permits in one call, ids distinct, all or none; the list releases: all
 * or nothing, release(List) an error unless all went. */
static void test_permits_n(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "pn");
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 5), DLOCK_OK);
    permit_buf ids[4], more[2];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 4, 10000, ids), DLOCK_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(strlen(ids[i]), 32);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(ids[i], ids[j]);
    }
    sem_counts(p, 1, 4);
    /* 2 asked, 1 free: none taken */
    assert_int_equal(dlock_permit_semaphore_try_n(p, 2, 0, 10000, more), DLOCK_ETIMEDOUT);
    assert_string_equal(more[0], "");
    sem_counts(p, 1, 4);
    int64_t left = 0;
    assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[0], &left), DLOCK_OK);
    assert_true(left > 0 && left <= 10000);
    const char *two[] = {ids[0], ids[1]};
    int64_t released = -1;
    assert_int_equal(dlock_permit_semaphore_try_release_list(p, two, 2, &released), DLOCK_OK);
    assert_int_equal(released, 2);
    sem_counts(p, 3, 2);
    /* ids[0] is gone: nothing of the list is released */
    const char *mixed[] = {ids[2], ids[0]};
    assert_int_equal(dlock_permit_semaphore_try_release_list(p, mixed, 2, &released), DLOCK_OK);
    assert_int_equal(released, 0);
    assert_int_equal(dlock_permit_semaphore_release_list(p, mixed, 2), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), ids[0]));
    assert_non_null(strstr(dlock_last_error(), "unknown"));
    sem_counts(p, 3, 2);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[2], &left), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[0], &left), DLOCK_ENOTOWNER);
    const char *rest[] = {ids[2], ids[3]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, rest, 2), DLOCK_OK);
    sem_counts(p, 5, 0);
    /* an expired one in the list: nothing released, and it says so */
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 2, 60, more), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 1, 60000, ids), DLOCK_OK);
    th_sleep_ms(150);
    const char *exp[] = {ids[0], more[1]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, exp, 2), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "expired"));
    assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[0], &left), DLOCK_OK);
    assert_true(left > 50000);
    assert_int_equal(dlock_permit_semaphore_release(p, ids[0]), DLOCK_OK);
    sem_counts(p, 5, 0);
    dlock_permit_semaphore_free(p);
}

/* A list release publishes the number released, which Redisson's waiters
 * read as how many of themselves to wake. */
static void test_permits_list_release_publishes_count(void **state)
{
    (void)state;
    char name[128], ch[200];
    th_name(name, sizeof(name), "pn-pub");
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 7), DLOCK_OK);
    permit_buf ids[3];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 3, 60000, ids), DLOCK_OK);
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    const char *list[] = {ids[0], ids[1], ids[2]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, list, 3), DLOCK_OK);
    redisReply *r;
    struct timeval tv = {(time_t)(5 * th_slack()), 0};
    redisSetTimeout(sub, tv);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "3");
    freeReplyObject(r);
    redisFree(sub);
    dlock_permit_semaphore_free(p);
}

/* A thread that waits for n permits (with tok: as long as it takes, until
 * tok is fired). */
typedef struct nwaiter {
    dlock_permit_semaphore *p;
    int64_t n;
    dlock_cancel *tok;
    int rc;
    int64_t at;
    permit_buf ids[4];
    pthread_t t;
} nwaiter;

static void *nwaiter_main(void *arg)
{
    nwaiter *w = arg;
    dlock_wait_opts o = {.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = 60000, .cancel = w->tok};
    w->rc = w->tok ? dlock_permit_semaphore_acquire_n_opts(w->p, w->n, &o, w->ids)
                   : dlock_permit_semaphore_try_n(w->p, w->n, 20000 * th_slack(), 60000, w->ids);
    w->at = th_now_ms();
    return NULL;
}

/* Waiters for several permits wake when a release of that many comes, from
 * dlock's list release or from Redisson's (its commands and its message, the
 * number released), not at the leases' end. */
static void test_permits_n_wakeups_both_ways(void **state)
{
    (void)state;
    char name[128], leases[200], ch[200];
    th_name(name, sizeof(name), "pn-wake");
    snprintf(leases, sizeof(leases), "{%s}:timeout", name);
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 3), DLOCK_OK);
    permit_buf held[3];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 3, 60000, held), DLOCK_OK);
    nwaiter w = {.p = p, .n = 3};
    pthread_create(&w.t, NULL, nwaiter_main, &w);
    th_sleep_ms(300);
    int64_t t0 = th_now_ms();
    const char *list[] = {held[0], held[1], held[2]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, list, 3), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.at - t0 < 1000 * th_slack());
    sem_counts(p, 0, 3);

    /* Redisson releases the waiter's 3 permits with its list release:
     * ZREM the ids, INCRBY 3, PUBLISH 3. A dlock waiter for 2 wakes. */
    nwaiter w2 = {.p = p, .n = 2};
    pthread_create(&w2.t, NULL, nwaiter_main, &w2);
    th_sleep_ms(300);
    t0 = th_now_ms();
    for (int i = 0; i < 3; i++) {
        char raw[16];
        hex_to_raw(w.ids[i], raw);
        freeReplyObject(th_cmd(&srv, "ZREM %s %b", leases, raw, (size_t)16));
    }
    freeReplyObject(th_cmd(&srv, "INCRBY %s 3", name));
    th_publish(&srv, ch, "3");
    pthread_join(w2.t, NULL);
    assert_int_equal(w2.rc, DLOCK_OK);
    assert_true(w2.at - t0 < 1000 * th_slack());
    sem_counts(p, 1, 2);

    /* Redisson's tryAcquire(2): DECRBY 2 and its ids (16 bytes) in the
     * leases; dlock's list release gives them back. */
    const char *rid_hex[] = {"00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"};
    redisReply *tr = th_cmd(&srv, "TIME");
    long long ms = atoll(tr->element[0]->str) * 1000 + 60000;
    freeReplyObject(tr);
    const char *w2list[] = {w2.ids[0], w2.ids[1]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, w2list, 2), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DECRBY %s 2", name));
    for (int i = 0; i < 2; i++) {
        char raw[16];
        hex_to_raw(rid_hex[i], raw);
        freeReplyObject(th_cmd(&srv, "ZADD %s %lld %b", leases, ms, raw, (size_t)16));
    }
    sem_counts(p, 1, 2);
    int64_t left = 0;
    assert_int_equal(dlock_permit_semaphore_lease_time(p, rid_hex[0], &left), DLOCK_OK);
    assert_true(left > 0 && left <= 60000);
    assert_int_equal(dlock_permit_semaphore_release_list(p, rid_hex, 2), DLOCK_OK);
    sem_counts(p, 3, 0);
    /* Redisson's permit without a lease: -1 */
    char raw[16];
    hex_to_raw(rid_hex[0], raw);
    freeReplyObject(th_cmd(&srv, "DECR %s", name));
    freeReplyObject(th_cmd(&srv, "ZADD %s 922337203685477 %b", leases, raw, (size_t)16));
    assert_int_equal(dlock_permit_semaphore_lease_time(p, rid_hex[0], &left), DLOCK_OK);
    assert_int_equal(left, -1);
    assert_int_equal(dlock_permit_semaphore_release(p, rid_hex[0]), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* The blocking n-permit acquire with options: one try (NULL), a wait that a
 * cancel token fired from another thread ends, none taken, and the token
 * refused (permits have none). */
static void test_permits_n_opts_cancel(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "pn-cancel");
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 3), DLOCK_OK);
    permit_buf held[2];
    assert_int_equal(dlock_permit_semaphore_acquire_n_opts(p, 2, NULL, held), DLOCK_OK);
    assert_int_equal(strlen(held[0]), 32);
    sem_counts(p, 1, 2);
    /* one try, not enough free: none taken */
    permit_buf more[2];
    assert_int_equal(dlock_permit_semaphore_acquire_n_opts(p, 2, NULL, more), DLOCK_ETIMEDOUT);
    assert_string_equal(more[0], "");
    uint64_t tk = 0;
    assert_int_equal(dlock_permit_semaphore_acquire_n_opts(p, 1, &(dlock_wait_opts){.token = &tk},
                                                           more),
                     DLOCK_EINVAL);
    /* a waiter for 2, cancelled while it waits: none taken */
    nwaiter w = {.p = p, .n = 2};
    assert_int_equal(dlock_cancel_new(&w.tok), DLOCK_OK);
    pthread_create(&w.t, NULL, nwaiter_main, &w);
    th_sleep_ms(200);
    int64_t fired = th_now_ms();
    dlock_cancel_fire(w.tok);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.at - fired < 2000 * th_slack());
    assert_string_equal(w.ids[0], "");
    assert_string_equal(w.ids[1], "");
    sem_counts(p, 1, 2);
    dlock_cancel_free(w.tok);
    const char *list[] = {held[0], held[1]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, list, 2), DLOCK_OK);
    sem_counts(p, 3, 0);
    dlock_permit_semaphore_free(p);
}

/* Watchdog permits taken n at a time live past several watchdog timeouts. */
static void test_permits_n_watchdog(void **state)
{
    (void)state;
    const int64_t wd = th_slack() > 1 ? 1500 : 300;
    dlock_client *c = th_client(&srv, wd);
    char name[128];
    th_name(name, sizeof(name), "pn-wd");
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(c, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 4), DLOCK_OK);
    permit_buf ids[3];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 3, DLOCK_WATCHDOG, ids), DLOCK_OK);
    th_sleep_ms(wd * 10 / 3);
    sem_counts(p, 1, 3);
    int64_t left = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[i], &left), DLOCK_OK);
        assert_true(left > 0 && left <= wd);
    }
    const char *list[] = {ids[0], ids[1], ids[2]};
    assert_int_equal(dlock_permit_semaphore_release_list(p, list, 3), DLOCK_OK);
    sem_counts(p, 4, 0);
    dlock_permit_semaphore_free(p);
    dlock_client_close(c);
}

static void test_permits_n_bad_input(void **state)
{
    (void)state;
    char name[128], leases[200];
    th_name(name, sizeof(name), "pn-bad");
    snprintf(leases, sizeof(leases), "{%s}:timeout", name);
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 3), DLOCK_OK);
    permit_buf ids[4];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 2, 60000, ids), DLOCK_OK);
    int64_t released = -1;
    /* a duplicate id: nothing sent, nothing released */
    const char *dup[] = {ids[0], ids[1], ids[0]};
    assert_int_equal(dlock_permit_semaphore_try_release_list(p, dup, 3, &released), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "twice"));
    /* the same id in capitals is the same id */
    char upper[DLOCK_PERMIT_ID_BUFSIZE];
    for (int i = 0; i < 33; i++)
        upper[i] = (char)(ids[0][i] >= 'a' && ids[0][i] <= 'f' ? ids[0][i] - 32 : ids[0][i]);
    const char *dup2[] = {ids[0], upper};
    assert_int_equal(dlock_permit_semaphore_release_list(p, dup2, 2), DLOCK_EINVAL);
    /* wrong length */
    const char *shortid[] = {ids[0], "abc"};
    assert_int_equal(dlock_permit_semaphore_release_list(p, shortid, 2), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "32 hex"));
    const char *nullid[] = {ids[0], NULL};
    assert_int_equal(dlock_permit_semaphore_release_list(p, nullid, 2), DLOCK_EINVAL);
    /* n = 0 and NULL lists */
    assert_int_equal(dlock_permit_semaphore_release_list(p, dup, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_try_release_list(p, NULL, 2, &released), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 0, 1000, ids + 2), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 1, 1000, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 1, -5, ids + 2), DLOCK_EINVAL);
    /* a wait below DLOCK_WAIT_FOREVER: refused with the wait named, nothing taken */
    assert_int_equal(dlock_permit_semaphore_try_n(p, 1, -2, 1000, ids + 2), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "wait_ms -2"));
    /* n above the total (3): refused, nothing taken */
    assert_int_equal(dlock_permit_semaphore_try_n(p, 4, 0, 1000, ids), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "': 4 permits asked of a semaphore of 3 in all"));
    assert_null(strstr(dlock_last_error(), "DLOCK"));   /* the script's word is not shown */
    assert_string_equal(ids[0], "");
    sem_counts(p, 1, 2);
    assert_int_equal(th_int(&srv, "ZCARD %s", leases), 2);
    /* lease time of a bad id */
    int64_t left = 0;
    assert_int_equal(dlock_permit_semaphore_lease_time(p, "xyz", &left), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, "00112233445566778899aabbccddeeff",
                                                       &left),
                     DLOCK_ENOTOWNER);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, "00112233445566778899aabbccddeeff",
                                                       NULL),
                     DLOCK_EINVAL);
    /* keys of another type: refused, nothing written */
    freeReplyObject(th_cmd(&srv, "DEL %s %s", name, leases));
    freeReplyObject(th_cmd(&srv, "SET %s abc", name));
    assert_int_equal(dlock_permit_semaphore_try_n(p, 2, 0, 1000, ids), DLOCK_EWRONGTYPE);
    const char *one[] = {"00112233445566778899aabbccddeeff"};
    assert_int_equal(dlock_permit_semaphore_try_release_list(p, one, 1, &released),
                     DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", leases), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "RPUSH %s x", leases));
    assert_int_equal(dlock_permit_semaphore_try_n(p, 1, 0, 1000, ids), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", leases));
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------------------- lifecycle */

typedef struct swaiter {
    dlock_semaphore *s;
    int rc;
    int64_t at;
    pthread_t t;
} swaiter;

static void *swaiter_main(void *arg)
{
    swaiter *w = arg;
    w->rc = dlock_semaphore_try(w->s, 2, 20000 * th_slack());
    w->at = th_now_ms();
    return NULL;
}

/* trySetPermits with a TTL, releaseIfExists, delete (waiters keep waiting,
 * a later set wakes them), expire and TTL; messages as Redisson's. */
static void test_semaphore_lifecycle(void **state)
{
    (void)state;
    char name[128], ch[200];
    th_name(name, sizeof(name), "sem-life");
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    int flag = -1;
    int64_t ttl = 0, n = 0;
    assert_int_equal(dlock_semaphore_ttl(s, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -2);
    /* releaseIfExists on a missing semaphore creates nothing */
    assert_int_equal(dlock_semaphore_release_if_exists(s, 2, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    struct timeval tv = {(time_t)(5 * th_slack()), 0};
    redisSetTimeout(sub, tv);
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, 3, 60000, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    redisReply *r;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);   /* the permits, published */
    assert_string_equal(r->element[2]->str, "3");
    freeReplyObject(r);
    assert_int_equal(dlock_semaphore_ttl(s, &ttl), DLOCK_OK);
    assert_true(ttl > 50000 && ttl <= 60000);
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, 9, 60000, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    assert_int_equal(dlock_semaphore_release_if_exists(s, 2, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);   /* the new count */
    assert_string_equal(r->element[2]->str, "5");
    freeReplyObject(r);
    redisFree(sub);
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    assert_int_equal(n, 5);
    /* expire and clear */
    assert_int_equal(dlock_semaphore_expire(s, 5000, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(dlock_semaphore_ttl(s, &ttl), DLOCK_OK);
    assert_true(ttl > 0 && ttl <= 5000);
    assert_int_equal(dlock_semaphore_expire(s, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);   /* a TTL was removed */
    assert_int_equal(dlock_semaphore_ttl(s, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -1);
    assert_int_equal(dlock_semaphore_expire(s, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);   /* none to remove: PERSIST's answer, Redisson's */
    /* delete: a waiter keeps waiting, and a later set wakes it */
    assert_int_equal(dlock_semaphore_delete(s, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_semaphore_delete(s, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    swaiter w = {.s = s};
    pthread_create(&w.t, NULL, swaiter_main, &w);
    th_sleep_ms(300);
    assert_int_equal(dlock_semaphore_release_if_exists(s, 2, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    th_sleep_ms(200);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, 2, 60000, &flag), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.at - t0 >= 0 && w.at - t0 < 1000 * th_slack());
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(dlock_semaphore_delete(s, NULL), DLOCK_OK);
    dlock_semaphore_free(s);
}

static void test_semaphore_lifecycle_bad_input(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "sem-life-bad");
    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    int flag = -1;
    int64_t ttl = 0;
    assert_int_equal(dlock_semaphore_delete(NULL, &flag), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_ttl(s, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_expire(s, -1, &flag), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, 3, 0, &flag), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, -1, 1000, &flag), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_release_if_exists(s, -1, &flag), DLOCK_EINVAL);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    /* a key of another type: refused, left as it was */
    freeReplyObject(th_cmd(&srv, "RPUSH %s x", name));
    assert_int_equal(dlock_semaphore_delete(s, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_semaphore_expire(s, 5000, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_semaphore_try_set_permits_ttl(s, 3, 5000, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_semaphore_release_if_exists(s, 1, &flag), DLOCK_EWRONGTYPE);
    /* releaseIfExists(0): 0 without a round trip (Redisson's), so not even
     * the key's type is read */
    long long calls0 = th_calls(&srv, "evalsha") + th_calls(&srv, "eval");
    flag = -1;
    assert_int_equal(dlock_semaphore_release_if_exists(s, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    assert_int_equal(th_calls(&srv, "evalsha") + th_calls(&srv, "eval"), calls0);
    assert_int_equal(th_int(&srv, "LLEN %s", name), 1);
    assert_int_equal(th_int(&srv, "PTTL %s", name), -1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "SET %s notanumber", name));
    assert_int_equal(dlock_semaphore_delete(s, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    /* a release past the largest count: refused, unchanged */
    freeReplyObject(th_cmd(&srv, "SET %s 2147483646", name));
    assert_int_equal(dlock_semaphore_release_if_exists(s, 2, &flag), DLOCK_EINVAL);
    /* the operation's own words, none of the script's refusal word */
    assert_non_null(strstr(dlock_last_error(), "releasing 2 permits would pass 2147483647"));
    assert_null(strstr(dlock_last_error(), "DLOCK"));
    redisReply *r = th_cmd(&srv, "GET %s", name);
    assert_string_equal(r->str, "2147483646");
    freeReplyObject(r);
    assert_int_equal(dlock_semaphore_ttl(s, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_semaphore_free(s);
}

/* The permit-expirable semaphore: acquiredPermits, getPermits, expire of
 * both keys, delete of both (waiters keep waiting). */
static void test_permit_semaphore_lifecycle(void **state)
{
    (void)state;
    char name[128], leases[200];
    th_name(name, sizeof(name), "pes-life");
    snprintf(leases, sizeof(leases), "{%s}:timeout", name);
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 4), DLOCK_OK);
    permit_buf ids[3];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 3, 60000, ids), DLOCK_OK);
    int64_t n = 0, ttl = 0;
    assert_int_equal(dlock_permit_semaphore_acquired(p, &n), DLOCK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(dlock_permit_semaphore_permits(p, &n), DLOCK_OK);
    assert_int_equal(n, 4);
    int flag = -1;
    assert_int_equal(dlock_permit_semaphore_expire(p, 30000, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_true(th_int(&srv, "PTTL %s", name) > 20000);
    assert_true(th_int(&srv, "PTTL %s", leases) > 20000);
    assert_int_equal(dlock_permit_semaphore_ttl(p, &ttl), DLOCK_OK);
    assert_true(ttl > 20000 && ttl <= 30000);
    assert_int_equal(dlock_permit_semaphore_expire(p, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(th_int(&srv, "PTTL %s", leases), -1);
    /* Redisson's rule: 1 when either key got the TTL: the count key gone,
     * the leases alive */
    freeReplyObject(th_cmd(&srv, "RENAME %s %s:count", name, name));
    assert_int_equal(dlock_permit_semaphore_expire(p, 30000, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_true(th_int(&srv, "PTTL %s", leases) > 20000);
    assert_int_equal(dlock_permit_semaphore_expire(p, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(dlock_permit_semaphore_expire(p, 0, &flag), DLOCK_OK);
    assert_int_equal(flag, 0);
    freeReplyObject(th_cmd(&srv, "RENAME %s:count %s", name, name));
    /* another type in the leases key: delete refused, nothing deleted */
    freeReplyObject(th_cmd(&srv, "RENAME %s %s:saved", leases, leases));
    freeReplyObject(th_cmd(&srv, "SET %s x", leases));
    assert_int_equal(dlock_permit_semaphore_delete(p, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_permit_semaphore_expire(p, 1000, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    assert_int_equal(th_int(&srv, "PTTL %s", name), -1);
    freeReplyObject(th_cmd(&srv, "RENAME %s:saved %s", leases, leases));
    assert_int_equal(dlock_permit_semaphore_delete(p, &flag), DLOCK_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s %s", name, leases), 0);
    assert_int_equal(dlock_permit_semaphore_permits(p, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    /* a waiter on the deleted semaphore waits, and a later set wakes it */
    nwaiter w = {.p = p, .n = 2};
    pthread_create(&w.t, NULL, nwaiter_main, &w);
    th_sleep_ms(300);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_set_total(p, 2), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.at - t0 < 1000 * th_slack());
    assert_int_equal(dlock_permit_semaphore_acquired(p, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock_permit_semaphore_acquired(p, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_permits(NULL, &n), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_delete(p, NULL), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------------------------ async */

typedef struct done_cb {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status, flag;
    int64_t count;
    uint64_t token;
    char text[400], msg[400];
    permit_buf ids[8];       /* an n-permit acquisition's (the first 8) */
} done_cb;

static void on_done(const dlock_async_result *res, void *ud)
{
    done_cb *d = ud;
    pthread_mutex_lock(&d->mu);
    d->status = dlock_async_status(res);
    d->flag = dlock_async_flag(res);
    d->count = dlock_async_count(res);
    d->token = dlock_async_token(res);
    snprintf(d->text, sizeof(d->text), "%s", dlock_async_text(res));
    snprintf(d->msg, sizeof(d->msg), "%s", dlock_async_message(res));
    for (size_t i = 0; i < 8; i++)
        snprintf(d->ids[i], sizeof(d->ids[i]), "%s", dlock_async_permit_ids(res, i));
    d->done = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* Waits for the callback (within 5 s x slack) and returns its status. */
static int await_cb(done_cb *d)
{
    int64_t end = th_now_ms() + 5000 * th_slack();
    pthread_mutex_lock(&d->mu);
    while (!d->done && th_now_ms() < end) {
        pthread_mutex_unlock(&d->mu);
        th_sleep_ms(2);
        pthread_mutex_lock(&d->mu);
    }
    int rc = d->done ? d->status : -1000;
    d->done = 0;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* One round of test_renewal_in_flight_at_release on l (an explicit-owner
 * handle when async): a watchdog hold, its renewal held back by the proxy,
 * the release (asynchronous or not) and a 4 s lease hold of the same owner
 * meanwhile; returns that hold's PTTL once the renewal has reached Redis. */
static long long renewal_round(th_proxy *p, dlock_lock *l, const char *name, int async)
{
    const int64_t slack = th_slack();
    int before = th_proxy_delayed(p);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    /* a renewal on its way (a new hold is renewed once soon, then every 3 s) */
    for (int64_t until = th_now_ms() + 6000 * slack;
         th_proxy_delayed(p) == before && th_now_ms() < until;)
        th_sleep_ms(2);
    assert_true(th_proxy_delayed(p) > before);
    assert_true(th_proxy_passed(p) < th_proxy_delayed(p));
    if (async) {
        done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
        assert_int_equal(dlock_lock_release_async(l, on_done, &d), DLOCK_OK);
        assert_int_equal(await_cb(&d), DLOCK_OK);
    } else {
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    assert_int_equal(dlock_lock_acquire(l, 4000), DLOCK_OK);
    /* the renewal has reached Redis by now */
    for (int64_t until = th_now_ms() + 6000 * slack;
         th_proxy_passed(p) < th_proxy_delayed(p) && th_now_ms() < until;)
        th_sleep_ms(2);
    th_sleep_ms(100);
    long long left = pttl(name);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    return left;
}

/* A client through proxy p whose command timeout (10 s) outlasts the
 * renewal the tests hold back (one answered later counts as failed: a
 * release waits no longer), with a 9 s watchdog timeout. The renewal script
 * is loaded first: after a NOSCRIPT the held-back renewal would be sent,
 * and held back, twice. */
static dlock_client *renew_client(th_proxy *p)
{
    const dlock__script *rs = &dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW];
    redisReply *r = th_cmd(&srv, "SCRIPT LOAD %b", rs->body, rs->len);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, rs->sha);
    freeReplyObject(r);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(p));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, 10000), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 9000), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

/* A watchdog renewal already on its way when the release returns must not
 * land after the owner's next hold of the same name and stretch it to the
 * watchdog timeout. A proxy holds the renewal script's request back (only
 * the watchdog's connection sends it) while the release and a 4 s lease
 * hold of the same owner go by: that hold keeps its 4 s, not 9. A blocking
 * release, then an asynchronous one. */
static void test_renewal_in_flight_at_release(void **state)
{
    (void)state;
    if (getenv("DLOCK_TEST_DEPLOY") && *getenv("DLOCK_TEST_DEPLOY"))
        skip();   /* one server behind the proxy */
    th_proxy *p = th_proxy_start(srv.port);
    assert_non_null(p);
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_client *c = renew_client(p);
    const int64_t delay = 600 * th_slack() < 8000 ? 600 * th_slack() : 8000;
    dlock_lock *l, *la;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "renew-late"), &l), DLOCK_OK);
    dlock_client_new_owner_id(c, owner, sizeof(owner));
    assert_int_equal(dlock_lock_get_as(c, name, owner, &la), DLOCK_OK);
    th_proxy_delay_match(p, dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW].sha, (int)delay);
    long long left = renewal_round(p, l, name, 0);
    long long left_async = renewal_round(p, la, name, 1);
    th_proxy_delay_match(p, NULL, 0);
    assert_true(left > 0 && left <= 4000);
    assert_true(left_async > 0 && left_async <= 4000);
    dlock_lock_free(l);
    dlock_lock_free(la);
    dlock_client_close(c);
    th_proxy_stop(p);
}

/* 1 once d's callback has come (not consumed). */
static int cb_done(done_cb *d)
{
    pthread_mutex_lock(&d->mu);
    int done = d->done;
    pthread_mutex_unlock(&d->mu);
    return done;
}

/* A proxy before the server for the renewal-in-flight tests, and how long
 * it is to hold a renewal back (*delay: 1 s x slack, 8 s at most). */
static th_proxy *renewal_proxy(int64_t *delay)
{
    th_proxy *p = th_proxy_start(srv.port);
    assert_non_null(p);
    *delay = 1000 * th_slack() < 8000 ? 1000 * th_slack() : 8000;
    return p;
}

/* Waits until the proxy holds one renewal back (a new hold is renewed once
 * soon). */
static void await_renewal_held(th_proxy *p)
{
    for (int64_t until = th_now_ms() + 6000 * th_slack();
         th_proxy_delayed(p) == 0 && th_now_ms() < until;)
        th_sleep_ms(2);
    assert_int_equal(th_proxy_delayed(p), 1);
}

/* An asynchronous release waits for the renewal in flight of its own hold
 * only: with hold A's renewal held back by the proxy, A's release (sent
 * first) waits for it, while the release of B (a lease hold of the same
 * client, nothing of it in flight) ends in its round trip, A's renewal
 * still held back and A's release still waiting. */
static void test_async_release_waits_for_its_own_renewal(void **state)
{
    (void)state;
    if (getenv("DLOCK_TEST_DEPLOY") && *getenv("DLOCK_TEST_DEPLOY"))
        skip();   /* one server behind the proxy */
    int64_t delay;
    th_proxy *p = renewal_proxy(&delay);
    dlock_client *c = renew_client(p);
    char na[128], nb[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(c, owner, sizeof(owner));
    dlock_lock *a, *b;
    assert_int_equal(dlock_lock_get_as(c, th_name(na, sizeof(na), "settle-a"), owner, &a),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(c, th_name(nb, sizeof(nb), "settle-b"), owner, &b),
                     DLOCK_OK);
    th_proxy_delay_match(p, dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW].sha, (int)delay);
    assert_int_equal(dlock_lock_acquire(b, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, DLOCK_WATCHDOG), DLOCK_OK);
    /* A's renewal on its way (a new hold is renewed once soon) */
    await_renewal_held(p);
    assert_int_equal(th_proxy_passed(p), 0);
    done_cb da = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    done_cb db = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release_async(a, on_done, &da), DLOCK_OK);
    assert_int_equal(dlock_lock_release_async(b, on_done, &db), DLOCK_OK);
    assert_int_equal(await_cb(&db), DLOCK_OK);
    int64_t b_ms = th_now_ms() - t0;
    /* B released (gone from Redis) while A's renewal is still held back and
     * A's release still waits for it */
    int a_done = cb_done(&da), passed = th_proxy_passed(p);
    print_message("B's release: %lld ms (A's renewal held back %lld ms)\n", (long long)b_ms,
                  (long long)delay);
    assert_int_equal(th_int(&srv, "EXISTS %s", nb), 0);
    assert_int_equal(passed, 0);
    assert_false(a_done);
    assert_int_equal(await_cb(&da), DLOCK_OK);
    /* A's callback came once its renewal had gone through */
    assert_int_equal(th_proxy_passed(p), 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", na), 0);
    th_proxy_delay_match(p, NULL, 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    th_proxy_stop(p);
}

/* A client closed while an asynchronous release waits for its hold's
 * renewal (held back by the proxy): the call ends with DLOCK_ECLOSED at
 * the close, whose return does not wait for the renewal; the lock was
 * released all the same. */
static void test_async_release_settling_at_close(void **state)
{
    (void)state;
    if (getenv("DLOCK_TEST_DEPLOY") && *getenv("DLOCK_TEST_DEPLOY"))
        skip();   /* one server behind the proxy */
    const int64_t slack = th_slack();
    int64_t delay;
    th_proxy *p = renewal_proxy(&delay);
    dlock_client *c = renew_client(p);
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(c, owner, sizeof(owner));
    dlock_lock *a;
    assert_int_equal(dlock_lock_get_as(c, th_name(name, sizeof(name), "settle-close"), owner, &a),
                     DLOCK_OK);
    th_proxy_delay_match(p, dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW].sha, (int)delay);
    assert_int_equal(dlock_lock_acquire(a, DLOCK_WATCHDOG), DLOCK_OK);
    await_renewal_held(p);
    done_cb da = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(dlock_lock_release_async(a, on_done, &da), DLOCK_OK);
    /* released in Redis, the callback still waiting for the renewal */
    for (int64_t until = th_now_ms() + 5000 * slack;
         th_int(&srv, "EXISTS %s", name) != 0 && th_now_ms() < until;)
        th_sleep_ms(2);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(th_proxy_passed(p), 0);
    assert_false(cb_done(&da));
    int64_t t0 = th_now_ms();
    dlock_client_close(c);   /* the handle lives until the callback has run */
    int64_t close_ms = th_now_ms() - t0;
    assert_true(cb_done(&da));
    assert_int_equal(await_cb(&da), DLOCK_ECLOSED);
    assert_int_equal(th_proxy_passed(p), 0);   /* the renewal still held back */
    print_message("close: %lld ms (the renewal held back %lld ms)\n", (long long)close_ms,
                  (long long)delay);
    dlock_lock_free(a);
    th_proxy_delay_match(p, NULL, 0);
    th_proxy_stop(p);
}

/* The new queries and lifecycle calls asynchronously, with the blocking
 * calls' answers. */
static void test_async_forms(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-parity");
    dlock_client_new_owner_id(cli, owner, sizeof(owner));
    done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    dlock_lock *f, *mine;
    assert_int_equal(dlock_fenced_lock_get_as(cli, name, owner, &f), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &mine), DLOCK_OK);
    assert_int_equal(dlock_lock_try(f, 0, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_get_token_async(f, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_true(d.token > 0);
    assert_int_equal(d.token, token_of(f));
    assert_int_equal(dlock_lock_extend_async(f, 60000, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_true(pttl(name) > 50000);
    /* a thread-owner handle is refused at once; a bad lease too */
    assert_int_equal(dlock_lock_extend_async(mine, 60000, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend_async(f, 0, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    assert_int_equal(dlock_lock_extend_async(f, 60000, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ENOTOWNER);
    dlock_lock_free(f);
    dlock_lock_free(mine);

    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, name, &s), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    assert_int_equal(dlock_semaphore_try_set_permits_ttl_async(s, 2, 60000, on_done, &d),
                     DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.flag, 1);
    assert_int_equal(dlock_semaphore_release_if_exists_async(s, 3, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.flag, 1);
    d.flag = -1;
    assert_int_equal(dlock_semaphore_release_if_exists_async(s, 0, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);   /* answered, no round trip */
    assert_int_equal(d.flag, 0);
    assert_int_equal(d.count, 0);
    assert_int_equal(dlock_semaphore_expire_async(s, 30000, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(dlock_semaphore_ttl_async(s, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_true(d.count > 20000 && d.count <= 30000);
    assert_int_equal(dlock_semaphore_delete_async(s, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.flag, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_semaphore_expire_async(s, -3, on_done, &d), DLOCK_EINVAL);
    dlock_semaphore_free(s);

    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 2), DLOCK_OK);
    permit_buf ids[1];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 1, 45000, ids), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_lease_time_async(p, ids[0], on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_true(d.count > 30000 && d.count <= 45000);
    assert_int_equal(dlock_permit_semaphore_expire_async(p, 30000, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_ttl_async(p, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_true(d.count > 20000 && d.count <= 30000);
    assert_int_equal(dlock_permit_semaphore_delete_async(p, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.flag, 1);
    assert_int_equal(dlock_permit_semaphore_lease_time_async(p, ids[0], on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_permit_semaphore_lease_time_async(p, "bad", on_done, &d), DLOCK_EINVAL);
    dlock_permit_semaphore_free(p);
}

/* The n-permit calls asynchronously: n ids, all or none; a waiter for n
 * woken by a list release; a cancelled or timed-out wait holds nothing; the
 * list releases' counts; the queries; bad input refused at the call. */
static void test_async_permits_n(void **state)
{
    (void)state;
    char name[128], ch[200];
    th_name(name, sizeof(name), "async-pn");
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    done_cb w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 5), DLOCK_OK);

    dlock_wait_opts once = {.wait_ms = 0, .lease_ms = 60000};
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 4, &once, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 4);
    permit_buf held[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(strlen(d.ids[i]), 32);
        memcpy(held[i], d.ids[i], sizeof(held[i]));
        for (int j = 0; j < i; j++)
            assert_string_not_equal(held[i], held[j]);
        int64_t ms = 0;
        assert_int_equal(dlock_permit_semaphore_lease_time(p, held[i], &ms), DLOCK_OK);
        assert_true(ms > 30000 && ms <= 60000);
    }
    assert_string_equal(d.ids[4], "");
    assert_int_equal(dlock_permit_semaphore_acquired_async(p, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 4);
    assert_int_equal(dlock_permit_semaphore_permits_async(p, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 5);

    /* 2 of 1 free: refused at once, nothing taken */
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 2, &once, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ETIMEDOUT);
    assert_string_equal(d.ids[0], "");
    sem_counts(p, 1, 4);
    /* a short wait runs out: nothing taken */
    dlock_wait_opts shortw = {.wait_ms = 200, .lease_ms = 60000};
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 3, &shortw, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ETIMEDOUT);
    assert_true(th_now_ms() - t0 >= 190);
    sem_counts(p, 1, 4);
    /* a cancelled wait: nothing taken */
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    dlock_wait_opts forever = {.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = 60000, .cancel = tok};
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 3, &forever, on_done, &d),
                     DLOCK_OK);
    th_sleep_ms(100);
    dlock_cancel_fire(tok);
    assert_int_equal(await_cb(&d), DLOCK_ECANCELED);
    sem_counts(p, 1, 4);
    dlock_cancel_free(tok);

    /* a waiter for 3 (the watchdog), woken by a list release of 4 */
    dlock_wait_opts waitw = {.wait_ms = 5000 * th_slack()};
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 3, &waitw, on_done, &w), DLOCK_OK);
    th_sleep_ms(100);
    const char *list[] = {held[0], held[1], held[2], held[3]};
    assert_int_equal(dlock_permit_semaphore_try_release_list_async(p, list, 4, on_done, &d),
                     DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 4);
    assert_int_equal(d.flag, 1);
    assert_int_equal(await_cb(&w), DLOCK_OK);
    assert_int_equal(w.count, 3);
    sem_counts(p, 2, 3);
    int64_t ms = 0;
    assert_int_equal(dlock_permit_semaphore_lease_time(p, w.ids[0], &ms), DLOCK_OK);
    assert_true(ms > 0);

    /* released already: the try form releases nothing, the other fails */
    assert_int_equal(dlock_permit_semaphore_try_release_list_async(p, list, 2, on_done, &d),
                     DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 0);
    assert_int_equal(d.flag, 0);
    const char *mixed[] = {w.ids[0], held[0]};
    assert_int_equal(dlock_permit_semaphore_release_list_async(p, mixed, 2, on_done, &d),
                     DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ENOTOWNER);
    sem_counts(p, 2, 3);
    const char *mine[] = {w.ids[0], w.ids[1], w.ids[2]};
    assert_int_equal(dlock_permit_semaphore_release_list_async(p, mine, 3, on_done, &d),
                     DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.count, 3);
    sem_counts(p, 5, 0);

    /* bad input: refused at the call, or (n above the total) in the callback */
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 0, &once, on_done, &d),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 2, &once, NULL, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(NULL, 2, &once, on_done, &d),
                     DLOCK_EINVAL);
    dlock_wait_opts badlease = {.lease_ms = -5};
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 2, &badlease, on_done, &d),
                     DLOCK_EINVAL);
    const char *dup[] = {held[0], held[0]};
    assert_int_equal(dlock_permit_semaphore_try_release_list_async(p, dup, 2, on_done, &d),
                     DLOCK_EINVAL);
    const char *shortid[] = {"abc"};
    assert_int_equal(dlock_permit_semaphore_release_list_async(p, shortid, 1, on_done, &d),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_release_list_async(p, list, 0, on_done, &d),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire_n_async(p, 6, &once, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_EINVAL);
    sem_counts(p, 5, 0);
    assert_int_equal(dlock_client_async_pending(cli), 0);
    dlock_permit_semaphore_free(p);
}

/* The election asynchronously: campaign (term = token, recorded, announced),
 * a rival waits and a watcher sees each change; resign publishes; a
 * campaign that runs out holds nothing; thread-owner handles are refused. */
static void test_async_election(void **state)
{
    (void)state;
    char name[128], o1[DLOCK_OWNER_BUFSIZE], o2[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "async-elect");
    dlock_client_new_owner_id(cli, o1, sizeof(o1));
    dlock_client_new_owner_id(cli, o2, sizeof(o2));
    done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    done_cb r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    done_cb w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    dlock_election *a, *b, *mine;
    assert_int_equal(dlock_election_get_as(cli, name, o1, &a), DLOCK_OK);
    assert_int_equal(dlock_election_get_as(cli, name, o2, &b), DLOCK_OK);
    assert_int_equal(dlock_election_get(cli, name, &mine), DLOCK_OK);

    /* no leader yet */
    assert_int_equal(dlock_election_leader_async(a, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.token, 0);
    /* a watcher of term 0 */
    dlock_wait_opts long_wait = {.wait_ms = 5000 * th_slack()};
    assert_int_equal(dlock_election_await_change_async(b, 0, &long_wait, on_done, &w), DLOCK_OK);

    assert_int_equal(dlock_election_campaign_async(a, NULL, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    uint64_t t1 = d.token;
    assert_true(t1 > 0);
    assert_int_equal(dlock_election_term(a), t1);
    assert_int_equal(await_cb(&w), DLOCK_OK);
    assert_int_equal(w.token, t1);
    assert_non_null(strstr(w.text, o1));
    uint64_t term = 0;
    char who[400];
    assert_int_equal(dlock_election_leader(b, &term, who, sizeof(who)), DLOCK_OK);
    assert_int_equal(term, t1);
    assert_int_equal(dlock_election_leader_async(b, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.token, t1);
    assert_string_equal(d.text, who);
    /* leading already: the same term */
    assert_int_equal(dlock_election_campaign_async(a, NULL, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(d.token, t1);

    /* a rival's one try fails, holding nothing; a short wait runs out */
    assert_int_equal(dlock_election_campaign_async(b, NULL, on_done, &r), DLOCK_OK);
    assert_int_equal(await_cb(&r), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_term(b), 0);
    dlock_wait_opts shortw = {.wait_ms = 150};
    assert_int_equal(dlock_election_campaign_async(b, &shortw, on_done, &r), DLOCK_OK);
    assert_int_equal(await_cb(&r), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_term(b), 0);
    /* a watch that runs out */
    assert_int_equal(dlock_election_await_change_async(b, t1, &shortw, on_done, &w), DLOCK_OK);
    assert_int_equal(await_cb(&w), DLOCK_ETIMEDOUT);

    /* the rival waits; the leader resigns; the rival takes the next term */
    assert_int_equal(dlock_election_campaign_async(b, &long_wait, on_done, &r), DLOCK_OK);
    assert_int_equal(dlock_election_await_change_async(a, t1, &long_wait, on_done, &w), DLOCK_OK);
    th_sleep_ms(100);
    assert_int_equal(dlock_election_resign_async(a, on_done, &d), DLOCK_OK);
    assert_int_equal(dlock_election_term(a), 0);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(await_cb(&r), DLOCK_OK);
    assert_true(r.token > t1);
    assert_int_equal(dlock_election_term(b), r.token);
    assert_int_equal(await_cb(&w), DLOCK_OK);
    assert_true(w.token == 0 || w.token == r.token);

    /* bad input: refused at the call */
    assert_int_equal(dlock_election_resign_async(a, on_done, &d), DLOCK_ENOTOWNER);
    /* any election handle has an owner id of its own: accepted, b leads */
    assert_int_equal(dlock_election_campaign_async(mine, NULL, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_campaign_async(a, NULL, NULL, &d), DLOCK_EINVAL);
    uint64_t tok = 0;
    dlock_wait_opts with_token = {.token = &tok};
    assert_int_equal(dlock_election_campaign_async(a, &with_token, on_done, &d), DLOCK_EINVAL);
    dlock_wait_opts leased = {.lease_ms = 1000};
    assert_int_equal(dlock_election_await_change_async(a, 0, &leased, on_done, &d),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_election_leader_async(NULL, on_done, &d), DLOCK_EINVAL);

    assert_int_equal(dlock_election_resign_async(b, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(dlock_client_async_pending(cli), 0);
    dlock_election_free(a);
    dlock_election_free(b);
    dlock_election_free(mine);
}

/* Redisson's replica rule on a primary without replicas: nothing to ask,
 * never a failure (dlock_last_replica_acks -1); dlock's count of 1 fails.
 * Blocking and asynchronous calls alike; the handle's count
 * (dlock_lock_replica_acks, dlock_semaphore_replica_acks) says the same for
 * both, the thread-local for the blocking ones. */
static void test_replica_ack_all_without_replicas(void **state)
{
    (void)state;
    if (getenv("DLOCK_TEST_DEPLOY") && *getenv("DLOCK_TEST_DEPLOY"))
        skip();   /* replicas there: test_sentinel covers them */
    char name[128];
    th_name(name, sizeof(name), "ack-none");
    dlock_client *c[2];
    int want[2] = {DLOCK_REPLICAS_ALL, 1};
    for (int i = 0; i < 2; i++) {
        dlock_config *cfg = dlock_config_new();
        assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
        assert_int_equal(dlock_config_set_replica_ack(cfg, want[i], 100, DLOCK_ACK_RELEASE),
                         DLOCK_OK);
        assert_int_equal(dlock_client_open(&c[i], cfg), DLOCK_OK);
        dlock_config_free(cfg);
    }
    dlock_lock *l;
    assert_int_equal(dlock_lock_replica_acks(NULL), -1);
    assert_int_equal(dlock_semaphore_replica_acks(NULL), -1);
    assert_int_equal(dlock_permit_semaphore_replica_acks(NULL), -1);
    assert_int_equal(dlock_lock_get(c[0], name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_replica_acks(l), -1);   /* no acquisition yet */
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), -1);
    assert_int_equal(dlock_lock_replica_acks(l), -1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    assert_int_equal(dlock_lock_get(c[1], name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_EREPLICAS);
    assert_int_equal(dlock_last_replica_acks(), 0);
    assert_int_equal(dlock_lock_replica_acks(l), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    /* Asynchronously the same: WAIT on the async connection too. */
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(c[1], owner, sizeof(owner));
    done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    dlock_wait_opts o = {.lease_ms = 10000};
    assert_int_equal(dlock_lock_get_as(c[1], name, owner, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_async(l, &o, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_EREPLICAS);
    assert_non_null(strstr(d.msg, "0 of 1 replicas"));
    assert_int_equal(dlock_lock_replica_acks(l), 0);   /* the io thread's acquisition */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    assert_int_equal(dlock_lock_get_as(c[0], name, owner, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_async(l, &o, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(dlock_lock_replica_acks(l), -1);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    assert_int_equal(dlock_lock_release_async(l, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    dlock_lock_free(l);
    /* A semaphore's permits: given back under dlock's count, taken under
     * Redisson's rule. */
    char sname[128];
    th_name(sname, sizeof(sname), "ack-none-sem");
    dlock_semaphore *s[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlock_semaphore_get(c[i], sname, &s[i]), DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(s[0], 2), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire_async(s[1], 1, NULL, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_EREPLICAS);
    assert_int_equal(dlock_semaphore_replica_acks(s[1]), 0);
    int64_t avail = -1;
    assert_int_equal(dlock_semaphore_available(s[0], &avail), DLOCK_OK);
    assert_int_equal(avail, 2);
    assert_int_equal(dlock_semaphore_acquire_async(s[0], 1, NULL, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    assert_int_equal(dlock_semaphore_replica_acks(s[0]), -1);
    assert_int_equal(dlock_semaphore_available(s[0], &avail), DLOCK_OK);
    assert_int_equal(avail, 1);
    dlock_semaphore_free(s[0]);
    dlock_semaphore_free(s[1]);
    dlock_client_close(c[0]);
    dlock_client_close(c[1]);
}

/* The multi-lock asynchronously: all or nothing; a try that finds one lock
 * busy holds none of them; a waiting one takes them all when the busy one
 * is released; a cancelled one holds nothing; the release frees all. */
static void test_async_multilock(void **state)
{
    (void)state;
    char names[3][128], owner[DLOCK_OWNER_BUFSIZE], other[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(cli, owner, sizeof(owner));
    dlock_client_new_owner_id(cli, other, sizeof(other));
    dlock_lock *ls[3], *rival, *mine;
    for (int i = 0; i < 3; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "async-ml%d", i);
        th_name(names[i], sizeof(names[i]), tag);
        assert_int_equal(dlock_lock_get_as(cli, names[i], owner, &ls[i]), DLOCK_OK);
    }
    assert_int_equal(dlock_lock_get_as(cli, names[1], other, &rival), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, names[0], &mine), DLOCK_OK);
    dlock_multilock *ml, *bad;
    assert_int_equal(dlock_multilock_new(ls, 3, &ml), DLOCK_OK);
    done_cb d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    done_cb r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

    /* all free: taken, each with the lease */
    dlock_wait_opts once = {.lease_ms = 30000};
    assert_int_equal(dlock_multilock_acquire_async(ml, &once, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    for (int i = 0; i < 3; i++) {
        long long t = pttl(names[i]);
        assert_true(t > 20000 && t <= 30000);
    }
    assert_int_equal(dlock_multilock_release_async(ml, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(th_int(&srv, "EXISTS %s", names[i]), 0);

    /* one busy: a try holds nothing; a short wait runs out holding nothing */
    assert_int_equal(dlock_lock_try(rival, 0, 30000), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire_async(ml, &once, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ETIMEDOUT);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[0]), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[2]), 0);
    dlock_wait_opts shortw = {.wait_ms = 200, .lease_ms = 30000};
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_multilock_acquire_async(ml, &shortw, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ETIMEDOUT);
    assert_true(th_now_ms() - t0 >= 190);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[0]), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[2]), 0);
    /* cancelled while waiting: nothing held */
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    dlock_wait_opts forever = {.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = 30000, .cancel = tok};
    assert_int_equal(dlock_multilock_acquire_async(ml, &forever, on_done, &d), DLOCK_OK);
    th_sleep_ms(100);
    dlock_cancel_fire(tok);
    assert_int_equal(await_cb(&d), DLOCK_ECANCELED);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[0]), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[2]), 0);
    dlock_cancel_free(tok);

    /* a waiter takes all once the busy one is released (woken, not at its
     * lease's end) */
    dlock_wait_opts waitw = {.wait_ms = 10000 * th_slack(), .lease_ms = 30000};
    assert_int_equal(dlock_multilock_acquire_async(ml, &waitw, on_done, &r), DLOCK_OK);
    th_sleep_ms(150);
    assert_int_equal(th_int(&srv, "EXISTS %s", names[0]), 0);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(rival), DLOCK_OK);
    assert_int_equal(await_cb(&r), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 5000 * th_slack());
    for (int i = 0; i < 3; i++)
        assert_int_equal(th_int(&srv, "EXISTS %s", names[i]), 1);
    assert_int_equal(dlock_lock_try(rival, 0, 1000), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_multilock_release_async(ml, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_OK);
    /* released already: the release's error */
    assert_int_equal(dlock_multilock_release_async(ml, on_done, &d), DLOCK_OK);
    assert_int_equal(await_cb(&d), DLOCK_ENOTOWNER);

    /* bad input */
    dlock_lock *mixed[] = {ls[1], mine};
    assert_int_equal(dlock_multilock_new(mixed, 2, &bad), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire_async(bad, &once, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_release_async(bad, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_acquire_async(ml, &once, NULL, &d), DLOCK_EINVAL);
    uint64_t tk = 0;
    dlock_wait_opts tokened = {.token = &tk};
    assert_int_equal(dlock_multilock_acquire_async(ml, &tokened, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_acquire_async(NULL, &once, on_done, &d), DLOCK_EINVAL);
    assert_int_equal(dlock_client_async_pending(cli), 0);
    dlock_multilock_free(bad);
    dlock_multilock_free(ml);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(ls[i]);
    dlock_lock_free(rival);
    dlock_lock_free(mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fenced_lock_counts_every_acquisition),
        cmocka_unit_test(test_fenced_lock_with_redisson),
        cmocka_unit_test(test_get_token_bad_input),
        cmocka_unit_test(test_extend_lease_hold),
        cmocka_unit_test(test_extend_fair),
        cmocka_unit_test(test_extend_bad_input),
        cmocka_unit_test(test_permits_n),
        cmocka_unit_test(test_permits_list_release_publishes_count),
        cmocka_unit_test(test_permits_n_wakeups_both_ways),
        cmocka_unit_test(test_permits_n_watchdog),
        cmocka_unit_test(test_permits_n_opts_cancel),
        cmocka_unit_test(test_permits_n_bad_input),
        cmocka_unit_test(test_semaphore_lifecycle),
        cmocka_unit_test(test_semaphore_lifecycle_bad_input),
        cmocka_unit_test(test_permit_semaphore_lifecycle),
        cmocka_unit_test(test_async_forms),
        cmocka_unit_test(test_async_permits_n),
        cmocka_unit_test(test_async_election),
        cmocka_unit_test(test_async_multilock),
        cmocka_unit_test(test_replica_ack_all_without_replicas),
        cmocka_unit_test(test_renewal_in_flight_at_release),
        cmocka_unit_test(test_async_release_waits_for_its_own_renewal),
        cmocka_unit_test(test_async_release_settling_at_close),
    };
    if (getenv("TH_ONLY"))   /* TH_ONLY='*pattern*': those tests only */
        cmocka_set_test_filter(getenv("TH_ONLY"));
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
