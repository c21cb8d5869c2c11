/* What test_multilock.c and test_redlock.c share: three servers with a
 * client each (and a second client on the first), and helpers that read Redis
 * itself, as a user would with redis-cli. Each test program includes it once. */
#ifndef DLOCK_TEST_MULTILOCK_COMMON_H
#define DLOCK_TEST_MULTILOCK_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "proxy.h"
#include "sync/sync.h"

#define NSRV 3
static th_redis srv[NSRV];
static dlock_client *cli[NSRV];   /* one client per server */
static dlock_client *cli0b;       /* a second client on srv[0] */

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < NSRV; i++) {
        if (th_redis_start(&srv[i], NULL) != 0)
            return -1;
        cli[i] = th_client(&srv[i], 0);
    }
    cli0b = th_client(&srv[0], 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(cli0b);
    for (int i = 0; i < NSRV; i++) {
        dlock_client_close(cli[i]);
        th_redis_destroy(&srv[i]);
    }
    return 0;
}

/* ------------------------------------------------------------- helpers */

static inline long long exists(int s, const char *name) { return th_int(&srv[s], "EXISTS %s", name); }

static inline long long pttl(int s, const char *name) { return th_int(&srv[s], "PTTL %s", name); }

/* The hold count of `owner` on lock `name` of server s. */
static inline long long count_of(int s, const char *name, const char *owner)
{
    redisReply *r = th_cmd(&srv[s], "HGET %s %s", name, owner);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    if (r)
        freeReplyObject(r);
    return v;
}

/* The calling thread's. */
static inline long long my_count(int s, const char *name)
{
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_owner_id(cli[s], owner, sizeof(owner));
    return count_of(s, name, owner);
}

static inline long long evalsha_calls(int s)
{
    redisReply *r = th_cmd(&srv[s], "INFO commandstats");
    const char *p = r ? strstr(r->str, "cmdstat_evalsha:calls=") : NULL;
    long long v = p ? atoll(p + strlen("cmdstat_evalsha:calls=")) : 0;
    if (r)
        freeReplyObject(r);
    return v;
}

/* k reentrant handles on client c, named prefix:<pid>:<n>-i. */
static inline void get_locks(dlock_client *c, const char *prefix, dlock_lock **l, char names[][128],
                      int k)
{
    char base[100];
    th_name(base, sizeof(base), prefix);
    for (int i = 0; i < k; i++) {
        snprintf(names[i], 128, "%s-%d", base, i);
        assert_int_equal(dlock_lock_get(c, names[i], &l[i]), DLOCK_OK);
    }
}

static inline void free_locks(dlock_lock **l, int k)
{
    for (int i = 0; i < k; i++)
        dlock_lock_free(l[i]);
}

/* A handle on `name` for another owner: a holder that is not us. */
static inline dlock_lock *other(dlock_client *c, const char *name)
{
    dlock_lock *l;
    assert_int_equal(dlock_lock_get_as(c, name, "other-owner:7", &l), DLOCK_OK);
    return l;
}

static inline int await_true(int (*pred)(void *), void *arg, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (th_now_ms() < end) {
        if (pred(arg))
            return 1;
        th_sleep_ms(5);
    }
    return pred(arg);
}

/* A thread that acquires a multi-lock, holds it, and releases it. */
typedef struct mlthread {
    dlock_multilock *ml;
    int64_t wait_ms, lease_ms, hold_ms;
    dlock_cancel *cancel;
    _Atomic int rc;                    /* 1 while waiting: read by the test meanwhile */
    _Atomic int64_t acquired_at;
    int release_rc;
    int64_t started, ended;
    char err[512];
    pthread_t t;
} mlthread;

static inline void *mlthread_main(void *arg)
{
    mlthread *m = arg;
    m->started = th_now_ms();
    int rc = dlock_multilock_acquire_opts(
        m->ml,
        &(dlock_wait_opts){.wait_ms = m->wait_ms, .lease_ms = m->lease_ms, .cancel = m->cancel});
    snprintf(m->err, sizeof(m->err), "%s", dlock_last_error());
    m->acquired_at = th_now_ms();
    m->rc = rc;
    if (m->rc == DLOCK_OK) {
        th_sleep_ms(m->hold_ms);
        m->release_rc = dlock_multilock_release(m->ml);
    }
    m->ended = th_now_ms();
    return NULL;
}

static inline int acquire_returned(void *arg) { return ((mlthread *)arg)->rc != 1; }

static inline void start_mlthread(mlthread *m, dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms,
                           int64_t hold_ms, dlock_cancel *cancel)
{
    memset(m, 0, sizeof(*m));
    m->ml = ml;
    m->wait_ms = wait_ms;
    m->lease_ms = lease_ms;
    m->hold_ms = hold_ms;
    m->cancel = cancel;
    atomic_init(&m->rc, 1);
    atomic_init(&m->acquired_at, 0);
    pthread_create(&m->t, NULL, mlthread_main, m);
}

#endif
