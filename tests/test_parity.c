/* Redisson parity, the last mile (issue 26): the fenced lock (Redisson's
 * RFencedLock) and getToken, with Redisson's side played by Redis commands in
 * its layout; the extension of a lease hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

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
    assert_int_equal(dlock_lock_acquire_fenced(g, 0, 5000, NULL, &direct), DLOCK_OK);
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

/* The fair lock's hold is extended the same way; its queue is untouched. */
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
    dlock_lock_free(l);
}

static void test_extend_bad_input(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "extend-bad");
    dlock_lock *l, *rd;
    assert_int_equal(dlock_lock_extend(NULL, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    /* a watchdog hold: refused, its TTL left to the watchdog */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    long long before = pttl(name);
    assert_int_equal(dlock_lock_extend(l, 600000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "watchdog"));
    assert_true(pttl(name) <= before);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fenced_lock_counts_every_acquisition),
        cmocka_unit_test(test_fenced_lock_with_redisson),
        cmocka_unit_test(test_get_token_bad_input),
        cmocka_unit_test(test_extend_lease_hold),
        cmocka_unit_test(test_extend_fair),
        cmocka_unit_test(test_extend_bad_input),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
