/* Fenced writes (dlock_fence_*): a write runs only when its token is not lower
 * than the highest its key's guard has seen; a stale holder's late write is
 * refused with DLOCK_EFENCED and changes nothing. And the fencing-token
 * counters expire after a week without breaking their order. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

#define WEEK_MS 604800000LL

static char *get(const char *key)
{
    redisReply *r = th_cmd(&srv, "GET %s", key);
    char *s = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return s;
}

static void assert_value(const char *key, const char *want)
{
    char *v = get(key);
    if (!want) {
        assert_null(v);
        return;
    }
    assert_non_null(v);
    assert_string_equal(v, want);
    free(v);
}

static void assert_guard(const char *guard, uint64_t want)
{
    redisReply *r = th_cmd(&srv, "GET %s", guard);
    assert_non_null(r);
    if (want == 0) {
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    } else {
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_int_equal(strtoull(r->str, NULL, 10), want);
    }
    freeReplyObject(r);
}

static int cmd(uint64_t token, char **out, int argc, ...)
{
    const char *av[16];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        av[i] = va_arg(ap, const char *);
    va_end(ap);
    size_t n;
    return dlock_fence_command(cli, token, argc, av, NULL, out, &n);
}

/* Two holders in turn: the first one's lease runs out while it is "paused",
 * the second takes the lock (a higher token) and writes; the first one's late
 * writes are all refused and change nothing. */
static void test_stale_holder_is_refused(void **state)
{
    (void)state;
    char name[128], key[160], guard[200];
    th_name(name, sizeof(name), "fenced");
    snprintf(key, sizeof(key), "%s:data", name);
    snprintf(guard, sizeof(guard), "dlock_fence:{%s}", key);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    uint64_t t1, t2;
    assert_int_equal(dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 200, .token = &t1}),
                     DLOCK_OK);
    assert_int_equal(dlock_fence_set(cli, t1, key, "first", 5, 0), DLOCK_OK);
    assert_guard(guard, t1);
    th_sleep_ms(300);   /* the first holder's lease ran out */

    dlock_client *c2 = th_client(&srv, 0);
    dlock_lock *l2;
    assert_int_equal(dlock_lock_get(c2, name, &l2), DLOCK_OK);
    assert_int_equal(
        dlock_lock_acquire_opts(l2, &(dlock_wait_opts){.lease_ms = 5000, .token = &t2}), DLOCK_OK);
    assert_true(t2 > t1);
    assert_int_equal(dlock_fence_set(c2, t2, key, "second", 6, 0), DLOCK_OK);

    /* The late writes of the first holder. */
    assert_int_equal(dlock_fence_set(cli, t1, key, "late", 4, 0), DLOCK_EFENCED);
    char want[64];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)t2);
    assert_non_null(strstr(dlock_last_error(), want));   /* names the guard's token */
    int64_t v = 0;
    assert_int_equal(dlock_fence_incrby(cli, t1, key, 1, &v), DLOCK_EFENCED);
    int deleted = 7;
    assert_int_equal(dlock_fence_del(cli, t1, key, &deleted), DLOCK_EFENCED);
    assert_int_equal(deleted, 7);   /* out-parameters untouched on failure */
    assert_value(key, "second");
    assert_guard(guard, t2);
    uint64_t h = 0;
    assert_int_equal(dlock_fence_guard(cli, key, &h), DLOCK_OK);
    assert_int_equal(h, t2);

    /* The newer holder writes on, any number of times with its token. */
    assert_int_equal(dlock_fence_set(c2, t2, key, "third", 5, 0), DLOCK_OK);
    assert_value(key, "third");
    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_close(c2);
    dlock_lock_free(l);
}

/* SET, HSET, INCRBY, DEL and XADD written, with their replies, then refused
 * for a lower token; the guard sees the highest token only. */
static void test_commands_and_replies(void **state)
{
    (void)state;
    char k[128];
    th_name(k, sizeof(k), "cmds");
    char h[160], s[160], n[160];
    snprintf(h, sizeof(h), "%s:h", k);
    snprintf(s, sizeof(s), "%s:s", k);
    snprintf(n, sizeof(n), "%s:n", k);
    char *out = NULL;
    assert_int_equal(cmd(100, &out, 3, "set", k, "v"), DLOCK_OK);
    assert_string_equal(out, "OK");
    free(out);
    assert_int_equal(cmd(100, &out, 4, "SET", k, "w", "NX"), DLOCK_OK);
    assert_null(out);   /* nil: not set */
    assert_value(k, "v");
    assert_int_equal(cmd(100, &out, 4, "HSET", h, "f", "1"), DLOCK_OK);
    assert_string_equal(out, "1");
    free(out);
    int64_t v = 0;
    assert_int_equal(dlock_fence_incrby(cli, 100, n, 5, &v), DLOCK_OK);
    assert_int_equal(v, 5);
    assert_int_equal(cmd(100, &out, 5, "XADD", s, "*", "f", "1"), DLOCK_OK);
    assert_non_null(strchr(out, '-'));   /* a stream id */
    free(out);
    assert_int_equal(cmd(100, &out, 4, "RPUSH", k, "a", "b"), DLOCK_EWRONGTYPE);
    assert_int_equal(cmd(100, &out, 2, "DEL", k), DLOCK_OK);
    assert_string_equal(out, "1");
    free(out);
    assert_int_equal(cmd(101, &out, 5, "RPUSH", k, "a", "b", "c"), DLOCK_OK);
    free(out);
    assert_int_equal(cmd(101, &out, 3, "LPOP", k, "2"), DLOCK_OK);
    assert_string_equal(out, "a\nb");   /* a list reply, one element per line */
    free(out);

    /* A lower token, for each: refused, nothing changed. */
    assert_int_equal(cmd(99, &out, 3, "SET", h, "x"), DLOCK_EFENCED);
    assert_int_equal(cmd(99, &out, 4, "HSET", h, "f", "2"), DLOCK_EFENCED);
    assert_int_equal(dlock_fence_incrby(cli, 99, n, 5, &v), DLOCK_EFENCED);
    assert_int_equal(cmd(99, &out, 5, "XADD", s, "*", "f", "2"), DLOCK_EFENCED);
    assert_int_equal(cmd(100, &out, 2, "DEL", k), DLOCK_EFENCED);   /* 100 < 101 */
    redisReply *r = th_cmd(&srv, "HGET %s f", h);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    assert_value(n, "5");
    assert_int_equal(th_int(&srv, "XLEN %s", s), 1);
    assert_int_equal(th_int(&srv, "LLEN %s", k), 1);
    /* An equal token writes; a higher one raises the guard. */
    assert_int_equal(dlock_fence_incrby(cli, 100, n, 1, &v), DLOCK_OK);
    assert_int_equal(v, 6);
    assert_int_equal(dlock_fence_incrby(cli, 250, n, 1, &v), DLOCK_OK);
    assert_int_equal(dlock_fence_incrby(cli, 249, n, 1, &v), DLOCK_EFENCED);
    assert_int_equal(v, 7);
    /* Tokens compare exactly at any size (beyond Lua's 2^53). */
    uint64_t big = (1ULL << 63) + 5;
    assert_int_equal(dlock_fence_incrby(cli, big, n, 1, &v), DLOCK_OK);
    assert_int_equal(dlock_fence_incrby(cli, big - 1, n, 1, &v), DLOCK_EFENCED);
    assert_int_equal(dlock_fence_incrby(cli, UINT64_MAX, n, 1, &v), DLOCK_OK);
    uint64_t g = 0;
    assert_int_equal(dlock_fence_guard(cli, n, &g), DLOCK_OK);
    assert_true(g == UINT64_MAX);
}

/* The guard's name shares the key's slot; its TTL follows the data's: none
 * while the key has none, the key's + a week, a week once it is gone. A
 * deletion is remembered: a late writer does not bring the key back. */
static void test_guard_names_and_ttl(void **state)
{
    (void)state;
    char k[128], guard[200];
    th_name(k, sizeof(k), "ttl");
    snprintf(guard, sizeof(guard), "dlock_fence:{%s}", k);
    assert_int_equal(dlock_fence_set(cli, 10, k, "v", 1, 0), DLOCK_OK);
    assert_int_equal(th_int(&srv, "PTTL %s", guard), -1);
    assert_int_equal(dlock_fence_set(cli, 10, k, "v", 1, 5000), DLOCK_OK);
    long long ttl = th_int(&srv, "PTTL %s", guard);
    assert_true(ttl > WEEK_MS && ttl <= WEEK_MS + 5000);
    int deleted = 0;
    assert_int_equal(dlock_fence_del(cli, 11, k, &deleted), DLOCK_OK);
    assert_int_equal(deleted, 1);
    ttl = th_int(&srv, "PTTL %s", guard);
    assert_true(ttl > WEEK_MS - 60000 && ttl <= WEEK_MS);
    assert_int_equal(dlock_fence_set(cli, 10, k, "late", 4, 0), DLOCK_EFENCED);
    assert_int_equal(th_int(&srv, "EXISTS %s", k), 0);

    /* A key with a hash tag keeps it: the guard is dlock_fence:<key>. */
    char tagged[160];
    snprintf(tagged, sizeof(tagged), "{%s}:cart", k);
    assert_int_equal(dlock_fence_set(cli, 5, tagged, "x", 1, 0), DLOCK_OK);
    snprintf(guard, sizeof(guard), "dlock_fence:{%s}:cart", k);
    assert_guard(guard, 5);
    /* '{' without a tag: the whole key is the slot's; braces around it. */
    snprintf(tagged, sizeof(tagged), "%s{open", k);
    assert_int_equal(dlock_fence_set(cli, 5, tagged, "x", 1, 0), DLOCK_OK);
    snprintf(guard, sizeof(guard), "dlock_fence:{%s{open}", k);
    assert_guard(guard, 5);
    /* '}' without a tag: no key can share its slot; refused, nothing written. */
    snprintf(tagged, sizeof(tagged), "%s}close", k);
    assert_int_equal(dlock_fence_set(cli, 5, tagged, "x", 1, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "hash tag"));
    assert_int_equal(th_int(&srv, "EXISTS %s", tagged), 0);
    uint64_t g;
    assert_int_equal(dlock_fence_guard(cli, tagged, &g), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_guard(cli, "never-written", &g), DLOCK_OK);
    assert_int_equal(g, 0);
}

/* Bad input: a clear code, nothing written. */
static void test_bad_input(void **state)
{
    (void)state;
    char k[128], guard[200];
    th_name(k, sizeof(k), "bad");
    snprintf(guard, sizeof(guard), "dlock_fence:{%s}", k);
    char *out = NULL;
    const char *av[] = {"SET", k, "v"};
    size_t n;
    assert_int_equal(dlock_fence_command(NULL, 5, 3, av, NULL, &out, &n), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_command(cli, 0, 3, av, NULL, &out, &n), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_command(cli, 5, 1, av, NULL, &out, &n), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_command(cli, 5, 3, NULL, NULL, &out, &n), DLOCK_EINVAL);
    const char *nul[] = {"SET", k, NULL};
    assert_int_equal(dlock_fence_command(cli, 5, 3, nul, NULL, &out, &n), DLOCK_EINVAL);
    assert_int_equal(cmd(5, &out, 2, "GET", k), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "not a write dlock fences"));
    assert_int_equal(cmd(5, &out, 1, "FLUSHALL"), DLOCK_EINVAL);
    assert_int_equal(cmd(5, &out, 3, "MSET", k, "v"), DLOCK_EINVAL);
    assert_int_equal(cmd(5, &out, 3, "DEL", k, "other"), DLOCK_EINVAL);
    assert_int_equal(cmd(5, &out, 3, "SET", "", "v"), DLOCK_EINVAL);
    static const char *many[1100];
    many[0] = "SADD";
    many[1] = k;
    for (int i = 2; i < 1100; i++)
        many[i] = "m";
    assert_int_equal(dlock_fence_command(cli, 5, 1025, many, NULL, &out, &n), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_set(cli, 5, k, NULL, 0, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_set(cli, 5, NULL, "v", 1, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_set(cli, 5, k, "v", 1, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_guard(cli, k, NULL), DLOCK_EINVAL);
    /* Refused by Redis (a syntax error, a type): nothing written, no guard. */
    assert_int_equal(cmd(5, &out, 4, "SET", k, "v", "BOGUS"), DLOCK_EREDIS);
    assert_int_equal(th_int(&srv, "EXISTS %s", k), 0);
    assert_guard(guard, 0);
    freeReplyObject(th_cmd(&srv, "RPUSH %s a", k));
    assert_int_equal(cmd(5, &out, 4, "HSET", k, "f", "v"), DLOCK_EWRONGTYPE);
    assert_guard(guard, 0);
    assert_int_equal(cmd(5, &out, 2, "INCR", k), DLOCK_EWRONGTYPE);
    /* A guard key holding somebody's data: refused, the data key untouched. */
    freeReplyObject(th_cmd(&srv, "DEL %s", k));
    freeReplyObject(th_cmd(&srv, "HSET %s not a-token", guard));
    assert_int_equal(dlock_fence_set(cli, 5, k, "v", 1, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", k), 0);
    assert_int_equal(th_int(&srv, "HLEN %s", guard), 1);
    freeReplyObject(th_cmd(&srv, "DEL %s", guard));
}

/* Every write the header lists reaches the script (C and Lua lists agree). */
static void test_every_listed_write_is_fenced(void **state)
{
    (void)state;
    static const char *const list[] = {
        "SET", "SETEX", "PSETEX", "SETNX", "GETDEL", "APPEND", "SETRANGE", "INCR", "INCRBY",
        "INCRBYFLOAT", "DECR", "DECRBY", "DEL", "UNLINK", "EXPIRE", "PEXPIRE", "PERSIST",
        "HSET", "HSETNX", "HDEL", "HINCRBY", "HINCRBYFLOAT", "LPUSH", "RPUSH", "LPOP", "RPOP",
        "LSET", "LTRIM", "SADD", "SREM", "ZADD", "ZREM", "ZINCRBY", "XADD", "XDEL", "XTRIM"};
    char k[128];
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
        th_name(k, sizeof(k), "listed");
        const char *av[] = {list[i], k, "1"};
        char *out = NULL;
        size_t n;
        int rc = dlock_fence_command(cli, 7, strcmp(list[i], "DEL") && strcmp(list[i], "UNLINK") &&
                                                    strcmp(list[i], "INCR") &&
                                                    strcmp(list[i], "DECR") &&
                                                    strcmp(list[i], "PERSIST") &&
                                                    strcmp(list[i], "GETDEL")
                                                ? 3
                                                : 2,
                                     av, NULL, &out, &n);
        free(out);
        if (rc == DLOCK_EINVAL || strstr(dlock_last_error(), "not a write dlock fences"))
            fail_msg("%s: %s", list[i], dlock_last_error());
    }
}

/* The token counters expire after a week of no fenced acquisition, for every
 * lock type, and a counter gone (expired, or lost) never lowers the tokens. */
static void test_token_counters_expire(void **state)
{
    (void)state;
    char name[128], tk[200];
    for (int kind = 0; kind < 4; kind++) {
        th_name(name, sizeof(name), "tok");
        snprintf(tk, sizeof(tk), "redisson_lock_token:{%s}", name);
        dlock_lock *l;
        int rc = kind == 0   ? dlock_lock_get(cli, name, &l)
                 : kind == 1 ? dlock_fair_lock_get(cli, name, &l)
                 : kind == 2 ? dlock_read_lock_get(cli, name, &l)
                             : dlock_write_lock_get(cli, name, &l);
        assert_int_equal(rc, DLOCK_OK);
        uint64_t t1, t2;
        assert_int_equal(
            dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 5000, .token = &t1}),
            DLOCK_OK);
        long long ttl = th_int(&srv, "PTTL %s", tk);
        if (ttl <= WEEK_MS - 60000 || ttl > WEEK_MS)
            fail_msg("kind %d: token counter PTTL %lld", kind, ttl);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        freeReplyObject(th_cmd(&srv, "DEL %s", tk));   /* as if it had expired */
        assert_int_equal(
            dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 5000, .token = &t2}),
            DLOCK_OK);
        assert_true(t2 > t1);
        assert_true(th_int(&srv, "PTTL %s", tk) > WEEK_MS - 60000);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_holder_is_refused),
        cmocka_unit_test(test_commands_and_replies),
        cmocka_unit_test(test_guard_names_and_ttl),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_every_listed_write_is_fenced),
        cmocka_unit_test(test_token_counters_expire),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
