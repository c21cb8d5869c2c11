/* Striped locks: the key-to-segment mapping (test vectors a Java service
 * reproduces with id % N and java.util.zip.CRC32; the CRC values were
 * computed with Python's zlib, an implementation of its own), handles on the
 * stripes of each lock kind on a real Redis, and bad input. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static th_redis srv;
static dlock_client *cli;

static int setup(void **state)
{
    (void)state;
    if (th_redis_start(&srv, NULL) != 0)
        return -1;
    cli = th_client(&srv, 0);
    return cli ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(cli);
    th_redis_destroy(&srv);
    return 0;
}

static const char *stripe(const char *base, const char *key, int n)
{
    static char buf[DLOCK_NAME_MAX + 1];
    int rc = dlock_stripe_name(base, key, n, buf, sizeof(buf));
    if (rc != DLOCK_OK)
        fail_msg("dlock_stripe_name(%s, %s, %d): %s", base, key, n, dlock_last_error());
    return buf;
}

static void test_integer_keys(void **state)
{
    (void)state;
    assert_string_equal(stripe("orders", "42", 16), "orders:segment:10");
    assert_string_equal(stripe("orders", "0", 16), "orders:segment:0");
    assert_string_equal(stripe("orders", "15", 16), "orders:segment:15");
    assert_string_equal(stripe("orders", "16", 16), "orders:segment:0");
    /* Java's %: the remainder keeps the sign of the id; never "-0". */
    assert_string_equal(stripe("orders", "-3", 16), "orders:segment:-3");
    assert_string_equal(stripe("orders", "-19", 16), "orders:segment:-3");
    assert_string_equal(stripe("orders", "-16", 16), "orders:segment:0");
    assert_string_equal(stripe("orders", "-0", 16), "orders:segment:0");
    /* Leading zeros: the value counts, as Long.parseLong reads it. */
    assert_string_equal(stripe("orders", "007", 16), "orders:segment:7");
    assert_string_equal(stripe("orders", "0000000000000000000000000042", 16), "orders:segment:10");
    /* Long.MAX_VALUE % 16 = 15, Long.MIN_VALUE % 16 = 0, Long.MIN_VALUE + 1
     * % 16 = -15; beyond 64 bits the remainder is still exact. */
    assert_string_equal(stripe("o", "9223372036854775807", 16), "o:segment:15");
    assert_string_equal(stripe("o", "-9223372036854775808", 16), "o:segment:0");
    assert_string_equal(stripe("o", "-9223372036854775807", 16), "o:segment:-15");
    assert_string_equal(stripe("o", "18446744073709551617", 16), "o:segment:1");
    assert_string_equal(stripe("o", "123456789012345678901234567891", 7), "o:segment:1");
    assert_string_equal(stripe("o", "12345", 1), "o:segment:0");
    assert_string_equal(stripe("o", "12345", 1000), "o:segment:345");
    assert_string_equal(stripe("o", "-12345", 1000), "o:segment:-345");
    assert_string_equal(stripe("o", "4000000", DLOCK_STRIPES_MAX), "o:segment:854272");
}

static void test_hashed_keys(void **state)
{
    (void)state;
    assert_string_equal(stripe("users", "The quick brown fox jumps over the lazy dog", 16),
                        "users:segment:9");   /* 0x414FA339 */
    assert_string_equal(stripe("users", "a", 16), "users:segment:3");        /* 0xE8B7BE43 */
    assert_string_equal(stripe("users", "a", 1000), "users:segment:907");
    assert_string_equal(stripe("users", "user:alice", 16), "users:segment:6");   /* 0x9D75D9F6 */
    assert_string_equal(stripe("users", "user:alice", 1000), "users:segment:422");
    assert_string_equal(stripe("users", "caf\xc3\xa9", 16), "users:segment:5");  /* 0x98AD42B5 */
    /* Not integers: a sign alone, '+', blanks, letters after digits. */
    assert_string_equal(stripe("k", "-", 16), "k:segment:8");      /* 0x97DDB3F8 */
    assert_string_equal(stripe("k", "+7", 16), "k:segment:9");     /* 0x8F144A99 */
    assert_string_equal(stripe("k", " 42", 16), "k:segment:5");    /* 0xB4F13D85 */
    assert_string_equal(stripe("k", "4 2", 16), "k:segment:12");   /* 0x8170E17C */
    assert_string_equal(stripe("k", "12a", 1000), "k:segment:186"); /* 0x0D2D530A */
}

/* "123456789", CRC-32's usual check string, is an integer key here; other
 * keys through the largest stripe count. */
static void test_crc_check_value(void **state)
{
    (void)state;
    assert_string_equal(stripe("c", "123456789", 1000), "c:segment:789");
    char buf[64];
    assert_int_equal(dlock_stripe_name("c", "abc", DLOCK_STRIPES_MAX, buf, sizeof(buf)),
                     DLOCK_OK);
    assert_string_equal(buf, "c:segment:278978");   /* crc32("abc") = 0x352441C2 */
}

/* Keys spread over the stripes: 16 stripes, 16000 names, none empty and
 * none with more than twice its share. */
static void test_spread(void **state)
{
    (void)state;
    int hits[16] = {0};
    for (int i = 0; i < 16000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "user-%d", i);
        const char *n = stripe("u", key, 16);
        int seg = atoi(n + strlen("u:segment:"));
        assert_in_range(seg, 0, 15);
        hits[seg]++;
    }
    for (int s = 0; s < 16; s++)
        assert_in_range(hits[s], 500, 2000);
}

static void test_bad_input(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(dlock_stripe_name("b", "1", 0, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "0 stripes"));
    assert_int_equal(dlock_stripe_name("b", "1", -4, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_int_equal(dlock_stripe_name("b", "1", DLOCK_STRIPES_MAX + 1, buf, sizeof(buf)),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_stripe_name("b", "", 4, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "key"));
    assert_int_equal(dlock_stripe_name("b", NULL, 4, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_int_equal(dlock_stripe_name("", "1", 4, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "base"));
    assert_int_equal(dlock_stripe_name(NULL, "1", 4, buf, sizeof(buf)), DLOCK_EINVAL);
    assert_int_equal(dlock_stripe_name("b", "1", 4, NULL, 10), DLOCK_EINVAL);
    /* "b:segment:1" is 11 bytes: 12 fit it, 11 do not. */
    assert_int_equal(dlock_stripe_name("b", "1", 4, buf, 12), DLOCK_OK);
    assert_int_equal(dlock_stripe_name("b", "1", 4, buf, 11), DLOCK_ENAMETOOLONG);
    char *base = malloc(DLOCK_NAME_MAX + 1);
    memset(base, 'x', DLOCK_NAME_MAX);
    base[DLOCK_NAME_MAX - 10] = '\0';   /* + ":segment:1" = DLOCK_NAME_MAX */
    dlock_lock *l = (dlock_lock *)&l;
    assert_int_equal(dlock_lock_get_striped(cli, base, "1", 4, &l), DLOCK_OK);
    assert_int_equal(strlen(dlock_lock_name(l)), DLOCK_NAME_MAX);
    dlock_lock_free(l);
    base[DLOCK_NAME_MAX - 10] = 'x';
    base[DLOCK_NAME_MAX - 9] = '\0';
    assert_int_equal(dlock_lock_get_striped(cli, base, "1", 4, &l), DLOCK_ENAMETOOLONG);
    assert_null(l);
    free(base);
    l = (dlock_lock *)&l;
    assert_int_equal(dlock_lock_get_striped(cli, "b", "1", 0, &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_fair_lock_get_striped(NULL, "b", "1", 4, &l), DLOCK_EINVAL);
    assert_int_equal(dlock_read_lock_get_striped(cli, "b", "", 4, &l), DLOCK_EINVAL);
    assert_int_equal(dlock_write_lock_get_striped(cli, "b", "1", 4, NULL), DLOCK_EINVAL);
}

/* Another thread's try on a lock, for its own owner id. */
typedef struct contender {
    dlock_lock *l;
    int rc;
} contender;

static void *try_once(void *arg)
{
    contender *c = arg;
    c->rc = dlock_lock_try(c->l, 0, 5000);
    if (c->rc == DLOCK_OK)
        dlock_lock_release(c->l);
    return NULL;
}

static int other_thread_try(dlock_lock *l)
{
    contender c = {l, 0};
    pthread_t t;
    pthread_create(&t, NULL, try_once, &c);
    pthread_join(t, NULL);
    return c.rc;
}

/* A striped handle locks the name a plain handle on base:segment:N locks
 * (what a Redisson client on that name sees), and other keys' stripes stay
 * free. */
static void test_lock_on_redis(void **state)
{
    (void)state;
    char base[96];
    th_name(base, sizeof(base), "orders");
    dlock_lock *s, *plain, *other;
    assert_int_equal(dlock_lock_get_striped(cli, base, "42", 16, &s), DLOCK_OK);
    char want[160];
    snprintf(want, sizeof(want), "%s:segment:10", base);
    assert_string_equal(dlock_lock_name(s), want);
    assert_int_equal(dlock_lock_get(cli, want, &plain), DLOCK_OK);
    assert_int_equal(dlock_lock_get_striped(cli, base, "43", 16, &other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(s, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "HLEN %s", want), 1);
    assert_int_equal(other_thread_try(plain), DLOCK_ETIMEDOUT);
    assert_int_equal(other_thread_try(other), DLOCK_OK);
    /* id 58 = 42 + 16: the same stripe. */
    dlock_lock *same;
    assert_int_equal(dlock_lock_get_striped(cli, base, "58", 16, &same), DLOCK_OK);
    assert_int_equal(other_thread_try(same), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(s), DLOCK_OK);
    assert_int_equal(other_thread_try(same), DLOCK_OK);
    dlock_lock_free(same);
    dlock_lock_free(other);
    dlock_lock_free(plain);
    dlock_lock_free(s);
}

static void test_other_kinds(void **state)
{
    (void)state;
    char base[96], want[160];
    th_name(base, sizeof(base), "docs");
    snprintf(want, sizeof(want), "%s:segment:-3", base);
    dlock_lock *r, *w, *f;
    assert_int_equal(dlock_read_lock_get_striped(cli, base, "-3", 16, &r), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get_striped(cli, base, "-3", 16, &w), DLOCK_OK);
    assert_string_equal(dlock_lock_name(r), want);
    assert_int_equal(dlock_lock_acquire(r, 10000), DLOCK_OK);
    redisReply *mode = th_cmd(&srv, "HGET %s mode", want);
    assert_non_null(mode);
    assert_string_equal(mode->str, "read");
    freeReplyObject(mode);
    assert_int_equal(other_thread_try(w), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(other_thread_try(w), DLOCK_OK);

    th_name(base, sizeof(base), "queue");
    assert_int_equal(dlock_fair_lock_get_striped(cli, base, "user:alice", 16, &f), DLOCK_OK);
    snprintf(want, sizeof(want), "%s:segment:6", base);
    assert_string_equal(dlock_lock_name(f), want);
    assert_int_equal(dlock_lock_acquire(f, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", want), 1);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    dlock_lock_free(f);
    dlock_lock_free(w);
    dlock_lock_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integer_keys),  cmocka_unit_test(test_hashed_keys),
        cmocka_unit_test(test_crc_check_value), cmocka_unit_test(test_spread),
        cmocka_unit_test(test_bad_input),     cmocka_unit_test(test_lock_on_redis),
        cmocka_unit_test(test_other_kinds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
