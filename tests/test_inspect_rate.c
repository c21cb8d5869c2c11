/* Inspection of rate limiters: a snapshot says DLOCK_KIND_RATE with the
 * configuration (dlock_info_rate) and, for an OVERALL limiter, the permits
 * left now (dlock_info_count), read without writing (grants older than the
 * interval counted back, never above the rate); PER_CLIENT gives -1. The
 * walks report rate limiters to DLOCK_WALK_RATES only, and a limiter's own
 * count ({X}:value[:<client id>]) to none (it is no semaphore); locks,
 * semaphores and look-alike hashes are not read as rate limiters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

static dlock_rate_limiter *limiter(dlock_client *c, const char *name, dlock_rate_type type,
                                   int64_t rate, int64_t interval_ms)
{
    dlock_rate_limiter *r = NULL;
    assert_int_equal(dlock_rate_limiter_get(c, name, &r), DLOCK_OK);
    dlock_rate_config cfg = {type, rate, interval_ms, 0};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &cfg, 0), DLOCK_OK);
    return r;
}

static dlock_info *inspect(dlock_client *c, const char *name)
{
    dlock_info *info = NULL;
    assert_int_equal(dlock_client_inspect(c, name, &info), DLOCK_OK);
    assert_non_null(info);
    return info;
}

/* The count dlock_client_inspect gives name. */
static int64_t left(const char *name)
{
    dlock_info *info = inspect(cli, name);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RATE);
    int64_t n = dlock_info_count(info);
    dlock_info_free(info);
    return n;
}

/* A string key's value (GET) as text, "(nil)" when absent. */
static const char *get(const char *key, char *buf, size_t size)
{
    redisReply *x = th_cmd(&srv, "GET %s", key);
    snprintf(buf, size, "%s", x && x->type == REDIS_REPLY_STRING ? x->str : "(nil)");
    if (x)
        freeReplyObject(x);
    return buf;
}

/* An OVERALL limiter's snapshot: kind, configuration, the rate before any
 * grant, what is left after grants; nothing written by reading it (its
 * count and grants as they were); a lock's inspection refuses it. */
static void test_snapshot(void **state)
{
    (void)state;
    char name[96], key[160], b1[32], b2[32];
    th_name(name, sizeof(name), "irl");
    dlock_rate_limiter *r = limiter(cli, name, DLOCK_RATE_OVERALL, 5, 60000);
    dlock_info *info = inspect(cli, name);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RATE);
    assert_string_equal(dlock_info_redis_type(info), "hash");
    dlock_rate_config got;
    memset(&got, 0xff, sizeof(got));
    assert_int_equal(dlock_info_rate(info, &got), DLOCK_OK);
    assert_int_equal(got.type, DLOCK_RATE_OVERALL);
    assert_int_equal(got.rate, 5);
    assert_int_equal(got.interval_ms, 60000);
    assert_int_equal(got.keep_alive_ms, 0);
    assert_int_equal(dlock_info_count(info), 5);   /* nobody took from it: the rate */
    assert_int_equal(dlock_info_ttl(info), -1);
    assert_int_equal(dlock_info_waiters(info), -1);
    assert_int_equal(dlock_info_locked(info), 0);
    assert_int_equal(dlock_info_holders(info), 0);
    assert_null(dlock_info_mode(info));
    assert_int_equal(dlock_info_rate(info, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_info_rate(NULL, &got), DLOCK_EINVAL);
    dlock_info_free(info);

    assert_int_equal(dlock_rate_limiter_try_acquire(r, 3, 0), DLOCK_OK);
    assert_int_equal(left(name), 2);
    snprintf(key, sizeof(key), "{%s}:value", name);
    get(key, b1, sizeof(b1));
    snprintf(key, sizeof(key), "{%s}:permits", name);
    long long grants = th_int(&srv, "ZCARD %s", key);
    assert_int_equal(left(name), 2);
    snprintf(key, sizeof(key), "{%s}:value", name);
    assert_string_equal(get(key, b2, sizeof(b2)), b1);
    snprintf(key, sizeof(key), "{%s}:permits", name);
    assert_int_equal(th_int(&srv, "ZCARD %s", key), grants);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 0), DLOCK_OK);
    assert_int_equal(left(name), 0);

    /* A lock's inspection of the name: not a lock. */
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    info = NULL;
    assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_EWRONGTYPE);
    assert_null(info);
    assert_non_null(strstr(dlock_last_error(), "rate limiter"));
    dlock_lock_free(l);

    /* Another kind's snapshot has no rate configuration. */
    char other[96];
    th_name(other, sizeof(other), "irl-lock");
    info = inspect(cli, other);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_NONE);
    assert_int_equal(dlock_info_rate(info, &got), DLOCK_EINVAL);
    dlock_info_free(info);

    /* A keep-alive gives every key a TTL: the snapshot's is the hash's. */
    dlock_rate_config keep = {DLOCK_RATE_OVERALL, 5, 60000, 120000};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &keep, 1), DLOCK_OK);
    info = inspect(cli, name);
    assert_int_equal(dlock_info_rate(info, &got), DLOCK_OK);
    assert_int_equal(got.keep_alive_ms, 120000);
    assert_true(th_ttl_within(dlock_info_ttl(info), 120000, 2000));
    assert_int_equal(dlock_info_count(info), 0);   /* the state kept */
    dlock_info_free(info);
    assert_int_equal(dlock_rate_limiter_delete(r, NULL), DLOCK_OK);
    dlock_rate_limiter_free(r);
}

/* The window: grants older than the interval count back in the snapshot
 * while the keys still hold them (nothing written: the next call settles
 * them); a count above what the rate allows is never shown. */
static void test_window(void **state)
{
    (void)state;
    const int64_t interval = 1000 * th_slack();
    char name[96], key[160], buf[32];
    th_name(name, sizeof(name), "irl-win");
    dlock_rate_limiter *r = limiter(cli, name, DLOCK_RATE_OVERALL, 3, interval);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 2, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    assert_int_equal(left(name), 0);
    th_sleep_ms(interval + 100);
    assert_int_equal(left(name), 3);
    snprintf(key, sizeof(key), "{%s}:value", name);
    assert_string_equal(get(key, buf, sizeof(buf)), "0");   /* not given back by reading */
    snprintf(key, sizeof(key), "{%s}:permits", name);
    assert_int_equal(th_int(&srv, "ZCARD %s", key), 2);
    int64_t n = -1;
    assert_int_equal(dlock_rate_limiter_available(r, &n), DLOCK_OK);
    assert_int_equal(n, 3);   /* the limiter agrees, and settles */
    assert_int_equal(th_int(&srv, "ZCARD %s", key), 0);

    /* Rate 5, 4 taken; then rate 2 keeping the state: 0 left. When the 4
     * age out, 0 + 4 would be above the rate: the snapshot says 2. */
    dlock_rate_config five = {DLOCK_RATE_OVERALL, 5, interval, 0};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &five, 0), DLOCK_OK);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 4, 0), DLOCK_OK);
    assert_int_equal(left(name), 1);
    dlock_rate_config two = {DLOCK_RATE_OVERALL, 2, interval, 0};
    assert_int_equal(dlock_rate_limiter_set_rate(r, &two, 1), DLOCK_OK);
    assert_int_equal(left(name), 0);
    th_sleep_ms(interval + 100);
    assert_int_equal(left(name), 2);
    assert_int_equal(dlock_rate_limiter_available(r, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock_rate_limiter_delete(r, NULL), DLOCK_OK);
    dlock_rate_limiter_free(r);
}

/* PER_CLIENT: each client has its own count; the snapshot says -1. */
static void test_per_client(void **state)
{
    (void)state;
    char name[96];
    th_name(name, sizeof(name), "irl-pc");
    dlock_rate_limiter *r = limiter(cli, name, DLOCK_RATE_PER_CLIENT, 4, 60000);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    dlock_info *info = inspect(cli, name);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RATE);
    dlock_rate_config got;
    assert_int_equal(dlock_info_rate(info, &got), DLOCK_OK);
    assert_int_equal(got.type, DLOCK_RATE_PER_CLIENT);
    assert_int_equal(got.rate, 4);
    assert_int_equal(dlock_info_count(info), -1);
    dlock_info_free(info);
    assert_int_equal(dlock_rate_limiter_delete(r, NULL), DLOCK_OK);
    dlock_rate_limiter_free(r);
}

typedef struct walked {
    const char *prefix;
    int rates, counts, locks, other;
    int64_t left[4];
    char names[8][96];
} walked;

static int on_walk(const dlock_info *info, void *ud)
{
    walked *w = ud;
    if (!strstr(dlock_info_name(info), w->prefix))
        return 0;
    switch (dlock_info_kind(info)) {
    case DLOCK_KIND_RATE:
        if (w->rates < 4)
            w->left[w->rates] = dlock_info_count(info);
        w->rates++;
        break;
    case DLOCK_KIND_COUNT:
    case DLOCK_KIND_PERMITS:
        if (w->counts < 8)
            snprintf(w->names[w->counts], sizeof(w->names[0]), "%s", dlock_info_name(info));
        w->counts++;
        break;
    case DLOCK_KIND_LOCK:
    case DLOCK_KIND_RWLOCK:
        w->locks++;
        break;
    default:
        w->other++;
    }
    return 0;
}

/* The walks: rate limiters (a plain name, a name with a hash tag, a name
 * that is "{X}", a PER_CLIENT one with its count per client) to
 * DLOCK_WALK_RATES only; their counts of permits left to no walk, where a
 * semaphore named like one ("{X}:value" with no limiter X) stays a count;
 * look-alike hashes stay other data; one SCAN for every kind. */
static void test_walks(void **state)
{
    (void)state;
    char pfx[64], n[4][160], key[320];
    th_name(pfx, sizeof(pfx), "iwalk");
    snprintf(n[0], sizeof(n[0]), "%s:plain", pfx);
    snprintf(n[1], sizeof(n[1]), "%s:tag{%s}", pfx, pfx);
    snprintf(n[2], sizeof(n[2]), "{%s:braced}", pfx);
    snprintf(n[3], sizeof(n[3]), "%s:perclient", pfx);
    dlock_rate_limiter *r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = limiter(cli, n[i], i == 3 ? DLOCK_RATE_PER_CLIENT : DLOCK_RATE_OVERALL, 7, 60000);
        assert_int_equal(dlock_rate_limiter_try_acquire(r[i], i + 1, 0), DLOCK_OK);
    }
    /* Their counts exist ({..}:value, {..}:value:<client id>). */
    snprintf(key, sizeof(key), "{%s}:value", n[0]);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    snprintf(key, sizeof(key), "%s:value", n[1]);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    snprintf(key, sizeof(key), "%s:value", n[2]);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    snprintf(key, sizeof(key), "{%s}:value:%s", n[3], dlock_client_id(cli));
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    /* A semaphore named like a limiter's count, with no limiter; a held
     * lock; hashes that are not rate limiters (a field more, the type
     * missing). */
    snprintf(key, sizeof(key), "{%s:nolimiter}:value", pfx);
    freeReplyObject(th_cmd(&srv, "SET %s 3", key));
    /* ... and one whose limiter would be in another slot of a cluster
     * ("{A}B}:value": the key hashes on A, a name "A}B" whole). */
    freeReplyObject(th_cmd(&srv, "SET {%s:a}b}:value 4", pfx));
    /* A name whose companions hash elsewhere on a cluster (a '{' no '}'
     * closes): no object of the family can live there; on a cluster the
     * walks skip it (on one server it is a count). */
    freeReplyObject(th_cmd(&srv, "SET %s:x{y 5", pfx));
    dlock_lock *l;
    snprintf(key, sizeof(key), "%s:lock", pfx);
    assert_int_equal(dlock_lock_get(cli, key, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 60000), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "HSET %s:more rate 1 interval 10 type 0 owner x", pfx));
    freeReplyObject(th_cmd(&srv, "HSET %s:notype rate 1 interval 10", pfx));
    freeReplyObject(th_cmd(&srv, "HSET %s:words rate one interval 10 type 0", pfx));

    char pattern[80];
    snprintf(pattern, sizeof(pattern), "*%s*", pfx);
    walked rates = {pfx, 0, 0, 0, 0, {0}, {{0}}};
    assert_int_equal(dlock_client_walk(cli, pattern, DLOCK_WALK_RATES, 0, on_walk, &rates),
                     DLOCK_OK);
    assert_int_equal(rates.rates, 4);
    assert_int_equal(rates.counts + rates.locks + rates.other, 0);
    int64_t sum = 0, minus = 0;
    for (int i = 0; i < 4; i++) {
        sum += rates.left[i] >= 0 ? rates.left[i] : 0;
        minus += rates.left[i] == -1;
    }
    assert_int_equal(sum, 6 + 5 + 4);   /* 7 - 1, 7 - 2, 7 - 3 */
    assert_int_equal(minus, 1);         /* the PER_CLIENT one */

    long long scans = th_deployed(&srv) ? -1 : th_calls(&srv, "scan");
    walked all = {pfx, 0, 0, 0, 0, {0}, {{0}}};
    int rc = dlock_client_walk(cli, pattern,
                               DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS | DLOCK_WALK_RATES, 100000,
                               on_walk, &all);
    if (rc != DLOCK_OK)
        fail_msg("walk: %s", dlock_last_error());
    if (scans >= 0)
        assert_int_equal(th_calls(&srv, "scan") - scans, 1);
    assert_int_equal(all.rates, 4);
    assert_int_equal(all.locks, 1);
    int odd = th_deployed(&srv) && !strcmp(th_deploy_name(), "cluster") ? 0 : 1;
    assert_int_equal(all.counts, 2 + odd);   /* the semaphores, none of the limiters' counts */
    snprintf(key, sizeof(key), "{%s:nolimiter}:value", pfx);
    int named = 0;
    for (int i = 0; i < all.counts && i < 8; i++)
        named += !strcmp(all.names[i], key);
    assert_int_equal(named, 1);
    assert_int_equal(all.other, 0);

    walked old = {pfx, 0, 0, 0, 0, {0}, {{0}}};
    assert_int_equal(dlock_client_walk(cli, pattern, DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS, 0,
                                       on_walk, &old),
                     DLOCK_OK);
    assert_int_equal(old.rates, 0);
    assert_int_equal(old.locks, 1);
    assert_int_equal(old.counts, 2 + odd);
    walked counts = {pfx, 0, 0, 0, 0, {0}, {{0}}};
    assert_int_equal(dlock_client_scan_counts(cli, pattern, on_walk, &counts), DLOCK_OK);
    assert_int_equal(counts.counts, 2 + odd);
    walked locks = {pfx, 0, 0, 0, 0, {0}, {{0}}};
    assert_int_equal(dlock_client_scan(cli, pattern, on_walk, &locks), DLOCK_OK);
    assert_int_equal(locks.locks, 1);
    assert_int_equal(locks.rates, 0);
    assert_int_equal(dlock_client_walk(cli, pattern, 8, 0, on_walk, &locks), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "DLOCK_WALK_RATES"));

    /* One by one: a limiter's count is other data, the semaphore a count,
     * the look-alikes other data, the lock a lock. */
    snprintf(key, sizeof(key), "{%s}:value", n[0]);
    dlock_info *info = inspect(cli, key);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_OTHER);
    assert_string_equal(dlock_info_redis_type(info), "string");
    dlock_info_free(info);
    snprintf(key, sizeof(key), "{%s}:value:%s", n[3], dlock_client_id(cli));
    info = inspect(cli, key);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_OTHER);
    dlock_info_free(info);
    snprintf(key, sizeof(key), "{%s:nolimiter}:value", pfx);
    info = inspect(cli, key);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_COUNT);
    assert_int_equal(dlock_info_count(info), 3);
    dlock_info_free(info);
    const char *others[] = {"more", "notype", "words"};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "%s:%s", pfx, others[i]);
        info = inspect(cli, key);
        assert_int_equal(dlock_info_kind(info), DLOCK_KIND_OTHER);
        dlock_info_free(info);
    }
    snprintf(key, sizeof(key), "%s:lock", pfx);
    info = inspect(cli, key);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_LOCK);
    dlock_info_free(info);

    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dlock_rate_limiter_delete(r[i], NULL), DLOCK_OK);
        dlock_rate_limiter_free(r[i]);
    }
    freeReplyObject(th_cmd(&srv, "DEL %s:more", pfx));
    freeReplyObject(th_cmd(&srv, "DEL %s:notype", pfx));
    freeReplyObject(th_cmd(&srv, "DEL %s:words", pfx));
    freeReplyObject(th_cmd(&srv, "DEL {%s:nolimiter}:value", pfx));
    freeReplyObject(th_cmd(&srv, "DEL {%s:a}b}:value", pfx));
    freeReplyObject(th_cmd(&srv, "DEL %s:x{y", pfx));
}

/* A limiter whose grants are not Redisson's encoding, or whose count is not
 * a number: its snapshot says -1, and a walk goes on. A client with an
 * inspect limit of one holder still reads the limiter's four fields. */
static void test_odd_state(void **state)
{
    (void)state;
    char name[96], key[160];
    th_name(name, sizeof(name), "irl-odd");
    dlock_rate_limiter *r = limiter(cli, name, DLOCK_RATE_OVERALL, 3, 60000);
    assert_int_equal(dlock_rate_limiter_try_acquire(r, 1, 0), DLOCK_OK);
    snprintf(key, sizeof(key), "{%s}:permits", name);
    freeReplyObject(th_cmd(&srv, "ZADD %s 1 x", key));   /* old and too short to unpack */
    assert_int_equal(left(name), -1);
    walked w = {name, 0, 0, 0, 0, {0}, {{0}}};
    int rc = dlock_client_walk(cli, name, DLOCK_WALK_RATES, 0, on_walk, &w);
    if (rc != DLOCK_OK)
        fail_msg("walk: %s", dlock_last_error());
    assert_int_equal(w.rates, 1);
    assert_int_equal(w.left[0], -1);
    freeReplyObject(th_cmd(&srv, "ZREM %s x", key));
    assert_int_equal(left(name), 2);

    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_inspect_limit(cfg, 1), DLOCK_OK);
    dlock_client *lim = NULL;
    assert_int_equal(dlock_client_open(&lim, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_info *info = inspect(lim, name);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RATE);
    assert_int_equal(dlock_info_count(info), 2);
    dlock_info_free(info);
    dlock_client_close(lim);

    snprintf(key, sizeof(key), "{%s}:value", name);
    freeReplyObject(th_cmd(&srv, "SET %s abc", key));
    assert_int_equal(left(name), -1);
    /* (The limiter refuses a count that is not a number: deleted by hand.) */
    assert_int_equal(dlock_rate_limiter_delete(r, NULL), DLOCK_EWRONGTYPE);
    freeReplyObject(th_cmd(&srv, "DEL %s", key));
    assert_int_equal(dlock_rate_limiter_delete(r, NULL), DLOCK_OK);
    dlock_rate_limiter_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_per_client),
        cmocka_unit_test(test_walks),
        cmocka_unit_test(test_odd_state),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
