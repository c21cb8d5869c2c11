/* The rate limiter (Redisson's RRateLimiter): its configuration in
 * Redisson's hash, the window (a grant's permits come back an interval
 * later, and a waiter sleeps until then without polling), per-client
 * budgets, early release, rate changes with and without the state,
 * keep-alive, asynchronous calls, grants shared with Redisson's side (its
 * layout written and read here with Redis commands), and bad input: no
 * rate, arguments out of range, keys of other types left as they were. */
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

static dlock_rate_limiter *limiter(dlock_client *c, const char *name)
{
    dlock_rate_limiter *r = NULL;
    assert_int_equal(dlock_rate_limiter_get(c, name, &r), DLOCK_OK);
    return r;
}

static int64_t available(dlock_rate_limiter *r)
{
    int64_t n = -1;
    assert_int_equal(dlock_rate_limiter_available(r, &n), DLOCK_OK);
    return n;
}

static char *hget(const char *key, const char *field, char *buf, size_t size)
{
    redisReply *x = th_cmd(&srv, "HGET %s %s", key, field);
    snprintf(buf, size, "%s", x && x->type == REDIS_REPLY_STRING ? x->str : "(nil)");
    if (x)
        freeReplyObject(x);
    return buf;
}

/* A string key's number (GET), or -1 when absent. */
static long long get_num(const char *fmt, const char *a)
{
    redisReply *x = th_cmd(&srv, fmt, a);
    long long v = x && x->type == REDIS_REPLY_STRING ? atoll(x->str) : -1;
    if (x)
        freeReplyObject(x);
    return v;
}

/* The server's clock in ms. */
static int64_t server_ms(void)
{
    redisReply *x = th_cmd(&srv, "TIME");
    assert_non_null(x);
    int64_t ms = atoll(x->element[0]->str) * 1000 + atoll(x->element[1]->str) / 1000;
    freeReplyObject(x);
    return ms;
}

/* --------------------------------------------------------------- basics */

/* The configuration in Redisson's hash; a fresh limiter has its rate; each
 * grant is a member of {name}:permits in Redisson's encoding (the id's
 * length, the id, the permits as a 4-byte unsigned int); too few permits is
 * ETIMEDOUT with no wait. */
static void test_basics(void **state)
{
    (void)state;
    char name[96], key[160], b[64];
    th_name(name, sizeof(name), "rl");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 5, 60000, 0}, got;
    int set = -1;
    assert_int_equal(dlock_rate_limiter_try_set_rate(r, &cfg, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    dlock_rate_config other = {DLOCK_RATE_PER_CLIENT, 9, 1000, 0};
    assert_int_equal(dlock_rate_limiter_try_set_rate(r, &other, &set), DLOCK_OK);
    assert_int_equal(set, 0);
    assert_int_equal(dlock_rate_limiter_config(r, &got), DLOCK_OK);
    assert_int_equal(got.type, DLOCK_RATE_OVERALL);
    assert_int_equal(got.rate, 5);
    assert_int_equal(got.interval_ms, 60000);
    assert_int_equal(got.keep_alive_ms, 0);
    assert_string_equal(hget(name, "rate", b, sizeof(b)), "5");
    assert_string_equal(hget(name, "interval", b, sizeof(b)), "60000");
    assert_string_equal(hget(name, "type", b, sizeof(b)), "0");
    assert_string_equal(hget(name, "keepAliveTime", b, sizeof(b)), "0");
    assert_int_equal(available(r), 5);
    snprintf(key, sizeof(key), "{%s}:value", name);
    assert_int_equal(get_num("GET %s", key), 5);   /* the count starts at the rate */

    uint64_t at = 0;
    int64_t t0 = server_ms();
    assert_int_equal(dlock_rate_limiter_acquire_opts(r, 3, &(dlock_wait_opts){.token = &at}),
                     DLOCK_OK);
    assert_true((int64_t)at >= t0 && (int64_t)at <= server_ms());   /* the server's clock */
    assert_int_equal(available(r), 2);
    int64_t w0 = th_now_ms();
    int rc = dlock_rate_limiter_try_acquire(r, 3, 0);
    assert_int_equal(rc, DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), name));
    assert_true(th_now_ms() - w0 < 1000 * th_slack());
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 0), DLOCK_OK);
    assert_int_equal(available(r), 0);
    assert_int_equal(get_num("GET %s", key), 0);

    snprintf(key, sizeof(key), "{%s}:permits", name);
    redisReply *x = th_cmd(&srv, "ZRANGE %s 0 -1 WITHSCORES", key);
    assert_non_null(x);
    assert_int_equal(x->elements, 4);
    uint32_t sum = 0;
    int at_seen = 0;
    for (size_t i = 0; i < 4; i += 2) {
        const unsigned char *m = (const unsigned char *)x->element[i]->str;
        assert_int_equal(x->element[i]->len, 1 + 16 + 4);
        assert_int_equal(m[0], 16);
        uint32_t permits;
        memcpy(&permits, m + 17, 4);
        sum += permits;
        at_seen |= permits == 3 && atoll(x->element[i + 1]->str) == (long long)at;
    }
    assert_int_equal(sum, 5);
    assert_true(at_seen);   /* the 3 permits' grant, scored when the call said */
    freeReplyObject(x);

    int deleted = 0;
    assert_int_equal(dlock_rate_limiter_delete(r, &deleted), DLOCK_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s {%s}:value {%s}:permits", name, name, name), 0);
    assert_int_equal(dlock_rate_limiter_delete(r, &deleted), DLOCK_OK);
    assert_int_equal(deleted, 0);
    dlock_rate_limiter_free(r);
}

/* ------------------------------------------------------------- the window */

/* Three permits per 800 ms: a fourth waits until the first grant ages out,
 * asking Redis twice (the try that learnt when, the one then), not polling. */
static void test_window(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), interval = 800;
    char name[96];
    th_name(name, sizeof(name), "rl-window");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 3, interval, 0};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 0), DLOCK_OK);
    int64_t t0 = th_now_ms();
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    long long calls0 = th_calls(&srv, "evalsha");
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 10000 * slack), DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    long long asked = th_calls(&srv, "evalsha") - calls0;
    if (took < interval - 50 || took > interval + 500 * slack)
        fail_msg("the fourth permit came %lld ms after the first (interval %lld)",
                 (long long)took, (long long)interval);
    if (asked > 3)
        fail_msg("%lld attempts for one wait", asked);
    /* Past the interval the window is whole again. */
    th_sleep_ms(interval + 100);
    assert_int_equal(available(r), 3);
    dlock_rate_limiter_free(r);
}

/* Each client has its own budget under PER_CLIENT, in
 * {name}:value:<client id>. */
static void test_per_client(void **state)
{
    (void)state;
    char name[96], key[200];
    th_name(name, sizeof(name), "rl-client");
    dlock_client *c2 = th_client(&srv, 0);
    assert_non_null(c2);
    dlock_rate_limiter *a = limiter(cli, name), *b = limiter(c2, name);
    dlock_rate_config cfg = {DLOCK_RATE_PER_CLIENT, 2, 60000, 0};
    assert_int_equal(dlock_rate_limiter_try_set_rate(a, &cfg, NULL), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(a, 2, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(a, 1, 0), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_rate_limiter_try_acquire(b, 2, 0), DLOCK_OK);   /* its own two */
    snprintf(key, sizeof(key), "{%s}:value:%s", name, dlock_client_id(c2));
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    snprintf(key, sizeof(key), "{%s}:permits:%s", name, dlock_client_id(cli));
    assert_int_equal(th_int(&srv, "ZCARD %s", key), 1);
    snprintf(key, sizeof(key), "{%s}:value", name);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);   /* no overall state */
    dlock_rate_limiter_free(a);
    dlock_rate_limiter_free(b);
    dlock_client_close(c2);
}

/* release gives permits back early, at most up to the rate; 0 is nothing. */
static void test_release(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "rl-release");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 4, 60000, 0};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 4, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_release(r, 0), DLOCK_OK);
    assert_int_equal(available(r), 0);
    assert_int_equal(dlock_rate_limiter_release(r, 3), DLOCK_OK);
    assert_int_equal(available(r), 3);
    assert_int_equal(dlock_rate_limiter_release(r, 100), DLOCK_OK);
    assert_int_equal(available(r), 4);   /* not past the rate */
    dlock_rate_limiter_free(r);
}

/* set_rate keeping the state: the grants in the window count against the
 * new rate; without it every permit is free; update only when one is set; a
 * change of type drops the old state. */
static void test_set_and_update(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "rl-set");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 4, 60000, 0};
    int updated = -1;
    assert_int_equal(dlock_rate_limiter_update_rate(r, &cfg, 1, &updated), DLOCK_OK);
    assert_int_equal(updated, 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 3, 0), DLOCK_OK);
    cfg.rate = 10;
    assert_int_equal(dlock_rate_limiter_update_rate(r, &cfg, 1, &updated), DLOCK_OK);
    assert_int_equal(updated, 1);
    assert_int_equal(available(r), 7);
    cfg.rate = 2;
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 1), DLOCK_OK);
    assert_int_equal(available(r), 0);   /* 3 granted, never below 0 */
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 0), DLOCK_OK);
    assert_int_equal(available(r), 2);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    cfg.type = DLOCK_RATE_PER_CLIENT;
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 1), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS {%s}:value {%s}:permits", name, name), 0);
    assert_int_equal(available(r), 2);
    dlock_rate_limiter_free(r);
}

/* keepAliveTime: every key lives that long after the last change; expire
 * and its removal reach all of them. */
static void test_keep_alive_and_expire(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "rl-keep");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 4, 1000, 20000};
    assert_int_equal(dlock_rate_limiter_try_set_rate(r, &cfg, NULL), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    assert_true(th_ttl_within(th_int(&srv, "PTTL %s", name), 20000, 2000));
    assert_true(th_ttl_within(th_int(&srv, "PTTL {%s}:value", name), 20000, 2000));
    assert_true(th_ttl_within(th_int(&srv, "PTTL {%s}:permits", name), 20000, 2000));
    int set = 0;
    assert_int_equal(dlock_rate_limiter_expire(r, 0, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    assert_int_equal(th_int(&srv, "PTTL {%s}:permits", name), -1);
    assert_int_equal(dlock_rate_limiter_expire(r, 50000, &set), DLOCK_OK);
    assert_true(th_ttl_within(th_int(&srv, "PTTL {%s}:value", name), 50000, 2000));
    dlock_rate_limiter_free(r);
}

/* ----------------------------------------------------------- asynchronous */

typedef struct arec {
    pthread_mutex_t mu;
    int done, status, flag;
    int64_t count;
    uint64_t token;
    int64_t at;
} arec;

static void on_done(const dlock_async_result *res, void *ud)
{
    arec *a = ud;
    pthread_mutex_lock(&a->mu);
    a->status = dlock_async_status(res);
    a->flag = dlock_async_flag(res);
    a->count = dlock_async_count(res);
    a->token = dlock_async_token(res);
    a->at = th_now_ms();
    a->done = 1;
    pthread_mutex_unlock(&a->mu);
}

static void await_rec(arec *a)
{
    int64_t until = th_now_ms() + 15000 * th_slack();
    for (;;) {
        pthread_mutex_lock(&a->mu);
        int d = a->done;
        pthread_mutex_unlock(&a->mu);
        if (d || th_now_ms() > until)
            break;
        th_sleep_ms(2);
    }
    assert_true(a->done);
}

static void test_async(void **state)
{
    (void)state;
    const int64_t interval = 600;
    char name[96];
    th_name(name, sizeof(name), "rl-async");
    dlock_rate_limiter *r = limiter(cli, name);
    dlock_rate_config cfg = {DLOCK_RATE_OVERALL, 2, interval, 0};
    arec a = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(dlock_rate_limiter_try_set_rate_async(r, &cfg, on_done, &a), DLOCK_OK);
    await_rec(&a);
    assert_int_equal(a.status, DLOCK_OK);
    assert_int_equal(a.flag, 1);
    a = (arec){.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(dlock_rate_limiter_available_async(r, on_done, &a), DLOCK_OK);
    await_rec(&a);
    assert_int_equal(a.count, 2);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 0), DLOCK_OK);
    a = (arec){.mu = PTHREAD_MUTEX_INITIALIZER};
    uint64_t at = 0;
    assert_int_equal(dlock_rate_limiter_acquire_async(
                         r, 1, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .token = &at},
                         on_done, &a),
                     DLOCK_OK);
    await_rec(&a);
    assert_int_equal(a.status, DLOCK_OK);
    assert_true(a.at - t0 >= interval - 50);
    assert_true(a.token > 0 && a.token == at);
    a = (arec){.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(dlock_rate_limiter_release_async(r, 1, on_done, &a), DLOCK_OK);
    await_rec(&a);
    assert_int_equal(a.status, DLOCK_OK);
    assert_int_equal(a.count, 2);   /* the first two aged out, one taken, one given back */
    assert_int_equal(dlock_rate_limiter_release_async(r, 0, on_done, &a), DLOCK_EINVAL);
    dlock_rate_limiter_free(r);
}

/* ------------------------------------------------------- Redisson's side */

/* A grant in Redisson's encoding, scored with its client's clock. */
static void redisson_grant(const char *name, int64_t at_ms, uint32_t permits)
{
    unsigned char m[21];
    m[0] = 16;
    for (int i = 1; i <= 16; i++)
        m[i] = (unsigned char)(rand() & 0xff);
    memcpy(m + 17, &permits, 4);   /* struct 'I': native order, as Redis's Lua packs it */
    char key[160], score[32];
    snprintf(key, sizeof(key), "{%s}:permits", name);
    snprintf(score, sizeof(score), "%lld", (long long)at_ms);
    redisContext *c = th_admin(&srv);
    assert_non_null(c);
    redisReply *x = redisCommand(c, "ZADD %s %s %b", key, score, m, sizeof(m));
    assert_true(x && x->type == REDIS_REPLY_INTEGER);
    freeReplyObject(x);
    redisFree(c);
}

/* Redisson's grants count against dlock's takers and age out on time; its
 * configuration (written by its trySetRate: four HSETNX) is dlock's. */
static void test_redisson_side(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* one server's clock and keys, written directly */
    char name[96];
    th_name(name, sizeof(name), "rl-redisson");
    assert_int_equal(th_int(&srv, "HSETNX %s rate 3", name), 1);
    assert_int_equal(th_int(&srv, "HSETNX %s interval 700", name), 1);
    assert_int_equal(th_int(&srv, "HSETNX %s keepAliveTime 0", name), 1);
    assert_int_equal(th_int(&srv, "HSETNX %s type 0", name), 1);
    int64_t now = server_ms();
    redisson_grant(name, now, 2);
    freeReplyObject(th_cmd(&srv, "SET {%s}:value 1", name));
    dlock_rate_limiter *r = limiter(cli, name);
    assert_int_equal(available(r), 1);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 0), DLOCK_ETIMEDOUT);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 5000 * th_slack()), DLOCK_OK);
    assert_true(th_now_ms() - t0 >= 700 - 100 - 50);   /* Redisson's grant aged out */
    assert_int_equal(th_int(&srv, "ZCARD {%s}:permits", name), 1);   /* dlock's, readable */
    dlock_rate_limiter_free(r);
}

/* -------------------------------------------------------------- bad input */

static void refused(int rc, int want, const char *word)
{
    if (rc != want || !strstr(dlock_last_error(), word))
        fail_msg("expected %s naming '%s': %s (%s)", dlock_errname(want), word,
                 dlock_errname(rc), dlock_last_error());
}

static void test_bad_input(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "rl-bad");
    dlock_rate_limiter *r = limiter(cli, name);
    int64_t n = 0;
    refused(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_ENOTFOUND, "no rate");
    refused(dlock_rate_limiter_available(r, &n), DLOCK_ENOTFOUND, "no rate");
    refused(dlock_rate_limiter_release(r, 1), DLOCK_ENOTFOUND, "no rate");
    dlock_rate_config cfg;
    refused(dlock_rate_limiter_config(r, &cfg), DLOCK_ENOTFOUND, "no rate");
    assert_int_equal(th_int(&srv, "EXISTS %s {%s}:value", name, name), 0);   /* nothing written */

    refused(dlock_rate_limiter_try_set_rate(r, &(dlock_rate_config){0, 0, 1000, 0}, NULL),
            DLOCK_EINVAL, "rate");
    refused(dlock_rate_limiter_try_set_rate(r, &(dlock_rate_config){0, 5, 0, 0}, NULL),
            DLOCK_EINVAL, "interval_ms");
    refused(dlock_rate_limiter_try_set_rate(r, &(dlock_rate_config){0, 5, 1000, 500}, NULL),
            DLOCK_EINVAL, "keep_alive_ms");
    refused(dlock_rate_limiter_try_set_rate(r, &(dlock_rate_config){7, 5, 1000, 0}, NULL),
            DLOCK_EINVAL, "type");
    refused(dlock_rate_limiter_try_set_rate(r, NULL, NULL), DLOCK_EINVAL, "NULL");
    assert_int_equal(dlock_rate_limiter_try_set_rate(r, &(dlock_rate_config){0, 5, 1000, 0},
                                                     NULL),
                     DLOCK_OK);
    refused(dlock_rate_limiter_try_acquire(r, 6, 0), DLOCK_EINVAL, "exceed the rate");
    refused(dlock_rate_limiter_try_acquire(r, 0, 0), DLOCK_EINVAL, "permits");
    refused(dlock_rate_limiter_release(r, -1), DLOCK_EINVAL, "permits");
    refused(dlock_rate_limiter_acquire_opts(r, 1, &(dlock_wait_opts){.lease_ms = 5}),
            DLOCK_EINVAL, "lease");
    refused(dlock_rate_limiter_expire(r, -5, NULL), DLOCK_EINVAL, "ttl_ms");
    refused(dlock_rate_limiter_available(r, NULL), DLOCK_EINVAL, "NULL");
    refused(dlock_rate_limiter_available(NULL, &n), DLOCK_EINVAL, "NULL");
    assert_int_equal(available(r), 5);   /* the refusals took nothing */

    /* Names holding other types: refused, left as they were. */
    char lock[96], sem[96], val[96];
    th_name(lock, sizeof(lock), "rl-lock");
    th_name(sem, sizeof(sem), "rl-sem");
    th_name(val, sizeof(val), "rl-val");
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, lock, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 60000), DLOCK_OK);
    dlock_rate_limiter *rl = limiter(cli, lock);
    refused(dlock_rate_limiter_try_set_rate(rl, &(dlock_rate_config){0, 5, 1000, 0}, NULL),
            DLOCK_EWRONGTYPE, "not a rate limiter");
    refused(dlock_rate_limiter_try_acquire(rl, 1, 0), DLOCK_EWRONGTYPE, "not a rate limiter");
    refused(dlock_rate_limiter_delete(rl, NULL), DLOCK_EWRONGTYPE, "not a rate limiter");
    assert_int_equal(th_int(&srv, "HLEN %s", lock), 1);   /* the lock's field alone */
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_true(held);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_rate_limiter_free(rl);

    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, sem, &s), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try_set_permits(s, 3, NULL), DLOCK_OK);
    dlock_rate_limiter *rs = limiter(cli, sem);
    refused(dlock_rate_limiter_set_rate(rs, &(dlock_rate_config){0, 5, 1000, 0}, 0),
            DLOCK_EWRONGTYPE, "not a rate limiter");
    refused(dlock_rate_limiter_available(rs, &n), DLOCK_EWRONGTYPE, "not a rate limiter");
    assert_int_equal(get_num("GET %s", sem), 3);
    dlock_semaphore_free(s);
    dlock_rate_limiter_free(rs);

    /* Its value key a hash: refused before anything is written. */
    assert_int_equal(th_int(&srv, "HSET {%s}:value f 1", val), 1);
    dlock_rate_limiter *rv = limiter(cli, val);
    refused(dlock_rate_limiter_try_set_rate(rv, &(dlock_rate_config){0, 5, 1000, 0}, NULL),
            DLOCK_EWRONGTYPE, "value");
    assert_int_equal(th_int(&srv, "EXISTS %s", val), 0);
    dlock_rate_limiter_free(rv);
    dlock_rate_limiter_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_per_client),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_set_and_update),
        cmocka_unit_test(test_keep_alive_and_expire),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_redisson_side),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
