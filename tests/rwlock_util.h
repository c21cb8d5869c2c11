/* What the read-write lock's tests share (test_rwlock.c, test_rwlock_interop.c):
 * one Redis server and client per test program, handles, queries, and a
 * thread that takes a lock, holds it and releases it. */
#ifndef DLOCK_TEST_RWLOCK_UTIL_H
#define DLOCK_TEST_RWLOCK_UTIL_H

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

#include "fixture.h"
#include "sync/sync.h"

/* ------------------------------------------------------------- helpers */

static inline dlock_lock *rd(dlock_client *c, const char *name, const char *owner)
{
    dlock_lock *l = NULL;
    int rc = owner ? dlock_read_lock_get_as(c, name, owner, &l) : dlock_read_lock_get(c, name, &l);
    assert_int_equal(rc, DLOCK_OK);
    return l;
}

static inline dlock_lock *wr(dlock_client *c, const char *name, const char *owner)
{
    dlock_lock *l = NULL;
    int rc = owner ? dlock_write_lock_get_as(c, name, owner, &l)
                   : dlock_write_lock_get(c, name, &l);
    assert_int_equal(rc, DLOCK_OK);
    return l;
}

static inline int locked(dlock_lock *l)
{
    int v = -1;
    assert_int_equal(dlock_lock_is_locked(l, &v), DLOCK_OK);
    return v;
}

static inline int held(dlock_lock *l)
{
    int v = -1;
    assert_int_equal(dlock_lock_is_held(l, &v), DLOCK_OK);
    return v;
}

static inline int64_t count(dlock_lock *l)
{
    int64_t n = -1;
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    return n;
}

static inline char *hget(const char *key, const char *field, char *buf, size_t size)
{
    redisReply *r = th_cmd(&srv, "HGET %s %s", key, field);
    snprintf(buf, size, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
    return buf;
}

/* 1 when n threads of c wait on the lock's channel within the time. */
static inline int await_waiters(dlock_client *c, const char *name, size_t n,
                                int64_t within_ms)
{
    char ch[200];
    int len = snprintf(ch, sizeof(ch), "redisson_rwlock:{%s}", name);
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (th_now_ms() < end) {
        if (dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) == n)
            return 1;
        th_sleep_ms(5);
    }
    return dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) == n;
}

/* A thread that takes a lock (wait, lease), holds it hold_ms, releases it. */
typedef struct taker {
    dlock_lock *l;
    int64_t wait_ms, lease, hold_ms;
    int rc, release_rc;
    _Atomic int64_t acquired_at;   /* read while the thread runs */
    int64_t released_at;           /* when the release returned */
    uint64_t attempts;
    pthread_t t;
} taker;

static inline void *taker_main(void *arg)
{
    taker *k = arg;
    uint64_t a0 = dlock__attempts;
    k->rc = dlock_lock_try(k->l, k->wait_ms, k->lease);
    k->attempts = dlock__attempts - a0;
    if (k->rc == DLOCK_OK) {
        k->acquired_at = th_now_ms();
        if (k->hold_ms >= 0) {
            th_sleep_ms(k->hold_ms);
            k->release_rc = dlock_lock_release(k->l);
            k->released_at = th_now_ms();
        }
    }
    return NULL;
}

/* hold_ms < 0: keep the lock (the handle's owner is the thread: gone with it). */
static inline void start_taker(taker *k, dlock_lock *l, int64_t wait_ms, int64_t lease,
                                int64_t hold_ms)
{
    memset(k, 0, sizeof(*k));
    k->l = l;
    k->wait_ms = wait_ms;
    k->lease = lease;
    k->hold_ms = hold_ms;
    pthread_create(&k->t, NULL, taker_main, k);
}

/* The result of a try with no wait from another thread (another owner). */
static inline int try_elsewhere(dlock_lock *l)
{
    taker k;
    start_taker(&k, l, 0, 5000, 0);
    pthread_join(k.t, NULL);
    return k.rc;
}

/* The next message on a subscribed connection, or "" after 5 s (x slack). */
static inline const char *next_message(redisContext *sub, char *buf, size_t size)
{
    struct timeval tv = {(time_t)(5 * th_slack()), 0};
    redisSetTimeout(sub, tv);
    redisReply *r = NULL;
    buf[0] = '\0';
    if (redisGetReply(sub, (void **)&r) == REDIS_OK && r && r->elements == 3)
        snprintf(buf, size, "%s", r->element[2]->str);
    freeReplyObject(r);
    return buf;
}

#endif
