/* The reentrant lock on a real Redis: holds, ownership, leases, fencing,
 * queries, the run helper, explicit owners, and every bad input. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "proxy.h"

static dlock_lock *get(const char *prefix)
{
    char name[128];
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_get(cli, th_name(name, sizeof(name), prefix), &l), DLOCK_OK);
    return l;
}

static int64_t count_of(dlock_lock *l)
{
    int64_t n = -1;
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    return n;
}

/* ------------------------------------------------------------ holds */

static void test_reentrant_hold_counts(void **state)
{
    (void)state;
    dlock_lock *l = get("reentrant");
    assert_int_equal(count_of(l), 0);
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(dlock_lock_try(l, 0, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(count_of(l), i);
    }
    /* In Redis: Redisson's layout, one field for this owner, count 3. */
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    redisReply *r = th_cmd(&srv, "HGET %s %s", dlock_lock_name(l), owner);
    assert_non_null(r);
    assert_string_equal(r->str, "3");
    freeReplyObject(r);
    assert_int_equal(th_int(&srv, "HLEN %s", dlock_lock_name(l)), 1);

    for (int i = 2; i >= 0; i--) {
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(count_of(l), i);
        int locked = -1;
        assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
        assert_int_equal(locked, i > 0);
    }
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), dlock_lock_name(l)));
    assert_int_equal(th_int(&srv, "EXISTS %s", dlock_lock_name(l)), 0);
    dlock_lock_free(l);
}

/* Another thread sees the lock held, but not by itself, and cannot release it. */
struct other_result {
    dlock_lock *l;
    int release_rc, held, held_rc, try_rc;
    int64_t count;
};

static void *other_thread(void *arg)
{
    struct other_result *o = arg;
    o->release_rc = dlock_lock_release(o->l);
    o->held_rc = dlock_lock_is_held(o->l, &o->held);
    dlock_lock_hold_count(o->l, &o->count);
    o->try_rc = dlock_lock_try(o->l, 0, 1000);
    return NULL;
}

static void test_other_thread_is_not_owner(void **state)
{
    (void)state;
    dlock_lock *l = get("owner");
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    struct other_result o = {l, 0, -1, -1, 0, -1};
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &o);
    pthread_join(t, NULL);
    assert_int_equal(o.release_rc, DLOCK_ENOTOWNER);
    assert_int_equal(o.held_rc, DLOCK_OK);
    assert_int_equal(o.held, 0);
    assert_int_equal(o.count, 0);
    assert_int_equal(o.try_rc, DLOCK_ETIMEDOUT);
    /* Still ours, untouched. */
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(count_of(l), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A lease runs out; another thread takes the lock; the first holder's release
 * then answers DLOCK_ENOTOWNER and leaves the new holder alone. */
struct taker {
    dlock_lock *l;
    int rc;
    int64_t waited;
};

static void *take_thread(void *arg)
{
    struct taker *t = arg;
    int64_t t0 = th_now_ms();
    t->rc = dlock_lock_try(t->l, 5000 * th_slack(), 10000);
    t->waited = th_now_ms() - t0;
    return NULL;
}

static void test_lease_expires(void **state)
{
    (void)state;
    dlock_lock *l = get("lease");
    int64_t lease = 400 * th_slack(), t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(l, 0, lease), DLOCK_OK);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_ttl(l, &ttl), DLOCK_OK);
    assert_true(ttl > 0 && ttl <= lease);
    struct taker t = {l, -99, 0};
    pthread_t th;
    pthread_create(&th, NULL, take_thread, &t);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, DLOCK_OK);
    assert_true(th_now_ms() - t0 >= lease - 5);   /* it had to wait for the lease */
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", dlock_lock_name(l)), 1);   /* taker's hold */
    assert_int_equal(th_int(&srv, "HLEN %s", dlock_lock_name(l)), 1);
    dlock_lock_free(l);
}

static void test_lease_is_not_renewed(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, 300);   /* renewals every 100 ms, if any */
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "noren"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 500), DLOCK_OK);
    th_sleep_ms(700);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void test_ttl_and_is_locked(void **state)
{
    (void)state;
    dlock_lock *l = get("ttl");
    int64_t ttl = 0;
    int locked = -1;
    assert_int_equal(dlock_lock_ttl(l, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -2);
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 0);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_ttl(l, &ttl), DLOCK_OK);
    assert_true(th_ttl_within(ttl, 30000, 5000));   /* default watchdog timeout */
    assert_int_equal(dlock_lock_is_locked(l, &locked), DLOCK_OK);
    assert_int_equal(locked, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* A hash with no expiry (someone else's hold without lease). */
    redisReply *r = th_cmd(&srv, "HSET %s someone:1 1", dlock_lock_name(l));
    freeReplyObject(r);
    assert_int_equal(dlock_lock_ttl(l, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -1);
    int was = 0;
    assert_int_equal(dlock_lock_force_release(l, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    dlock_lock_free(l);
}

static void test_is_held_by_owner_id(void **state)
{
    (void)state;
    dlock_lock *l = get("heldby");
    char me[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    assert_int_equal(strlen(me) > 37, 1);
    assert_memory_equal(me, dlock_client_id(cli), 36);
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    int held = 0;
    assert_int_equal(dlock_lock_is_held_by(l, me, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_lock_is_held_by(l, "someone-else:1", &held), DLOCK_OK);
    assert_int_equal(held, 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_is_held_by(l, me, &held), DLOCK_OK);
    assert_int_equal(held, 0);
    dlock_lock_free(l);
}

static void test_force_release(void **state)
{
    (void)state;
    dlock_lock *l = get("force");
    int was = -1;
    assert_int_equal(dlock_lock_force_release(l, &was), DLOCK_OK);
    assert_int_equal(was, 0);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_force_release(l, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", dlock_lock_name(l)), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_force_release(l, NULL), DLOCK_OK);
    dlock_lock_free(l);
}

/* ------------------------------------------------------------ fencing */

static void test_fencing_tokens_increase(void **state)
{
    (void)state;
    dlock_lock *l = get("fenced");
    uint64_t last = 0, tok = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dlock_lock_acquire_opts(l, &(dlock_wait_opts){.token = &tok}), DLOCK_OK);
        assert_true(tok > last);
        last = tok;
        if (i % 2 == 0) {   /* reentry counts too */
            assert_int_equal(dlock_lock_acquire_opts(l, &(dlock_wait_opts){.token = &tok}),
                             DLOCK_OK);
            assert_true(tok > last);
            last = tok;
            assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        }
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    char key[200];
    snprintf(key, sizeof(key), "redisson_lock_token:{%s}", dlock_lock_name(l));
    redisReply *r = th_cmd(&srv, "GET %s", key);
    assert_non_null(r);
    assert_int_equal(strtoull(r->str, NULL, 10), last);
    freeReplyObject(r);

    /* A busy lock gives no token and counts none. */
    freeReplyObject(th_cmd(&srv, "HSET %s other:1 1", dlock_lock_name(l)));
    assert_int_equal(dlock_lock_acquire_opts(l, &(dlock_wait_opts){.token = &tok}),
                     DLOCK_ETIMEDOUT);
    r = th_cmd(&srv, "GET %s", key);
    assert_int_equal(strtoull(r->str, NULL, 10), last);
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "DEL %s", dlock_lock_name(l)));

    /* Redisson's RFencedLock INCRs the same key: dlock continues from there. */
    freeReplyObject(th_cmd(&srv, "SET %s 9000000000000000", key));
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 5000, .token = &tok}), DLOCK_OK);
    assert_int_equal(tok, 9000000000000001ULL);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "SET %s %llu", key, (unsigned long long)last));

    /* Options with a reserved field set are refused, the token untouched. */
    tok = 7;
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.token = &tok, .reserved = {0, 1}}),
        DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "reserved[1]"));
    assert_int_equal(tok, 7);
    dlock_lock_free(l);
}

/* A restart without persistence loses the counter; tokens still go up (they
 * never fall below the server's clock in microseconds). */
static void test_fencing_tokens_survive_restart(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* restarts its server */
    dlock_lock *l = get("fenced-restart");
    uint64_t before = 0, after = 0;
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 5000, .token = &before}),
        DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_redis_restart(&srv), 0);
    assert_int_equal(
        dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = 5000, .token = &after}),
        DLOCK_OK);
    assert_true(after > before);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* -------------------------------------------------------------- run */

static int add_one(void *ud)
{
    int *n = ud;
    return ++*n;
}

static void *hold_then_run(void *arg)
{
    int *rc = arg;
    dlock_lock *l = *(dlock_lock **)(rc + 2);
    int calls = 0;
    rc[0] = dlock_lock_run(l, &(dlock_wait_opts){.lease_ms = 1000}, add_one, &calls, NULL);
    rc[1] = calls;
    return NULL;
}

static void test_run_helper(void **state)
{
    (void)state;
    dlock_lock *l = get("run");
    int calls = 0, res = 0;
    assert_int_equal(dlock_lock_run(l, NULL, add_one, &calls, &res), DLOCK_OK);
    assert_int_equal(calls, 1);
    assert_int_equal(res, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", dlock_lock_name(l)), 0);   /* released */

    /* Held elsewhere: fn is not called. */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    struct {
        int rc[2];
        dlock_lock *l;
    } arg = {{-1, -1}, l};
    pthread_t t;
    pthread_create(&t, NULL, hold_then_run, &arg);
    pthread_join(t, NULL);
    assert_int_equal(arg.rc[0], DLOCK_ETIMEDOUT);
    assert_int_equal(arg.rc[1], 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_run(l, &(dlock_wait_opts){.lease_ms = 1000}, NULL, NULL, NULL),
                     DLOCK_EINVAL);
    dlock_lock_free(l);
}

/* ---------------------------------------------------- explicit owners */

struct as_arg {
    dlock_lock *l;
    int rc;
};

static void *release_elsewhere(void *arg)
{
    struct as_arg *a = arg;
    a->rc = dlock_lock_release(a->l);
    return NULL;
}

static void test_explicit_owner_moves_between_threads(void **state)
{
    (void)state;
    char owner[DLOCK_OWNER_BUFSIZE], owner2[DLOCK_OWNER_BUFSIZE], name[128];
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_client_new_owner_id(cli, owner2, sizeof(owner2)), DLOCK_OK);
    assert_string_not_equal(owner, owner2);
    assert_int_equal(dlock_client_new_owner_id(cli, owner2, 10), DLOCK_EINVAL);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get_as(cli, th_name(name, sizeof(name), "as"), owner, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    int held = 0;
    assert_int_equal(dlock_lock_is_held_by(l, owner, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    struct as_arg a = {l, -99};
    pthread_t t;
    pthread_create(&t, NULL, release_elsewhere, &a);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    assert_int_equal(dlock_lock_get_as(cli, name, NULL, &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_lock_get_as(cli, name, "", &l), DLOCK_EINVAL);
}

/* ------------------------------------------------------------ bad input */

static void test_bad_names(void **state)
{
    (void)state;
    long long keys = th_int(&srv, "DBSIZE");
    dlock_lock *l = (dlock_lock *)1;
    assert_int_equal(dlock_lock_get(cli, NULL, &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_lock_get(cli, "", &l), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "empty"));
    assert_int_equal(dlock_lock_get(NULL, "x", &l), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_get(cli, "x", NULL), DLOCK_EINVAL);

    char *big = malloc(1 << 20);
    memset(big, 'n', (1 << 20) - 1);
    big[(1 << 20) - 1] = '\0';
    assert_int_equal(dlock_lock_get(cli, big, &l), DLOCK_ENAMETOOLONG);
    big[DLOCK_NAME_MAX + 1] = '\0';
    assert_int_equal(dlock_lock_get(cli, big, &l), DLOCK_ENAMETOOLONG);
    big[DLOCK_OWNER_MAX + 1] = '\0';
    assert_int_equal(dlock_lock_get_as(cli, "x", big, &l), DLOCK_ENAMETOOLONG);

    /* NULL handles and out-parameters. */
    int flag;
    int64_t v;
    assert_int_equal(dlock_lock_acquire(NULL, DLOCK_WATCHDOG), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_release(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_is_locked(NULL, &flag), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_hold_count(NULL, &v), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_ttl(NULL, &v), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_force_release(NULL, &flag), DLOCK_EINVAL);
    dlock_lock_free(NULL);
    assert_int_equal(th_int(&srv, "DBSIZE"), keys);   /* nothing written */

    /* Exactly the maximum works. */
    memset(big, 'n', DLOCK_NAME_MAX);
    big[DLOCK_NAME_MAX] = '\0';
    assert_int_equal(dlock_lock_get(cli, big, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    free(big);

    /* Non-UTF-8 bytes are just bytes. */
    assert_int_equal(dlock_lock_get(cli, "bin\xff\xfe\x01name", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 2000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %b", "bin\xff\xfe\x01name", (size_t)10), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void test_bad_durations(void **state)
{
    (void)state;
    dlock_lock *l = get("durations");
    long long keys = th_int(&srv, "DBSIZE");
    /* -1 was DLOCK_WATCHDOG before 0.2.0: a program not rebuilt gets an
     * error, not another lease. */
    assert_int_equal(dlock_lock_try(l, 0, -1), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease_ms"));
    assert_int_equal(dlock_lock_try(l, 0, -7), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_try(l, -2, 1000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "wait"));
    assert_int_equal(dlock_lock_try(l, 0, INT64_MAX), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire(l, INT64_MIN), DLOCK_EINVAL);
    assert_int_equal(th_int(&srv, "DBSIZE"), keys);
    dlock_lock_free(l);
}

static void test_wrong_type_key(void **state)
{
    (void)state;
    dlock_lock *l = get("wrongtype");
    const char *name = dlock_lock_name(l);
    freeReplyObject(th_cmd(&srv, "SET %s precious", name));
    int flag;
    int64_t v;
    assert_int_equal(dlock_lock_try(l, 0, DLOCK_WATCHDOG), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "not a lock"));
    assert_int_equal(dlock_lock_try(l, 200, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(l), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_is_locked(l, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_is_held(l, &flag), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_hold_count(l, &v), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_force_release(l, &flag), DLOCK_EWRONGTYPE);
    /* The value is untouched and nothing is scheduled for renewal. */
    redisReply *r = th_cmd(&srv, "GET %s", name);
    assert_string_equal(r->str, "precious");
    freeReplyObject(r);
    assert_int_equal(th_int(&srv, "PTTL %s", name), -1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    /* A list where the lock should be. */
    freeReplyObject(th_cmd(&srv, "RPUSH %s a", name));
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "LLEN %s", name), 1);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_lock_free(l);
}

/* ---------------------------------------------------------- connection */

static void test_unreachable_at_open(void **state)
{
    (void)state;
    th_redis dead;
    assert_int_equal(th_redis_start(&dead, NULL), 0);
    int port = dead.port;
    th_redis_destroy(&dead);   /* now nothing listens there */
    char url[128];
    snprintf(url, sizeof(url), "redis://bob:topsecret@127.0.0.1:%d", port);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 0, 10), DLOCK_OK);
    dlock_client *c = (dlock_client *)1;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_ECONN);
    assert_null(c);
    char where[64];
    snprintf(where, sizeof(where), "127.0.0.1:%d", port);
    assert_non_null(strstr(dlock_last_error(), where));
    assert_null(strstr(dlock_last_error(), "topsecret"));
    dlock_config_free(cfg);
}

/* A listening socket on a free loopback port; *url receives its address. */
static int loopback_listener(char *url, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(url, size, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
    return fd;
}

/* Opens a client on url with a short connect timeout and no retries. */
static int open_once(const char *url, dlock_client **c)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 300), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 0, 10), DLOCK_OK);
    *c = (dlock_client *)1;
    int rc = dlock_client_open(c, cfg);
    dlock_config_free(cfg);
    return rc;
}

/* A port whose connections the kernel completes but nobody accepts (a server
 * shutting down, a wedged process): the client is refused at open rather
 * than handed a connection on which a request could go out unanswered. */
static void test_silent_listener_at_open(void **state)
{
    (void)state;
    char url[64];
    int fd = loopback_listener(url, sizeof(url));
    dlock_client *c;
    assert_int_equal(open_once(url, &c), DLOCK_ECONN);
    assert_null(c);
    /* the handshake (CLIENT SETNAME, with the client's identity) went unanswered */
    assert_non_null(strstr(dlock_last_error(), "failed during CLIENT SETNAME"));
    close(fd);
}

/* A server that answers every connection with -LOADING. */
static void *loading_server(void *arg)
{
    int fd = *(int *)arg, conn;
    while ((conn = accept(fd, NULL, NULL)) >= 0) {
        char buf[256];
        if (read(conn, buf, sizeof(buf)) > 0) {
            static const char loading[] = "-LOADING Redis is loading the dataset in memory\r\n";
            (void)!write(conn, loading, sizeof(loading) - 1);
        }
        close(conn);
    }
    return NULL;
}

/* The first PING of a connection refused for a reason other than credentials
 * (here the server is still loading) is reported as what it is, not as an
 * authentication failure. */
static void test_loading_server_at_open(void **state)
{
    (void)state;
    char url[64];
    int fd = loopback_listener(url, sizeof(url));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loading_server, &fd), 0);
    dlock_client *c;
    int rc = open_once(url, &c);
    shutdown(fd, SHUT_RDWR);   /* ends the accept loop */
    pthread_join(t, NULL);
    close(fd);
    assert_null(c);
    if (rc != DLOCK_EREDIS)
        fail_msg("open against a loading server: %s (%s)", dlock_strerror(rc), dlock_last_error());
    assert_non_null(strstr(dlock_last_error(), "LOADING"));
}

static void test_auth_and_db_and_name(void **state)
{
    (void)state;
    th_redis sec;
    assert_int_equal(th_redis_start(&sec, "--requirepass", "s3cret", NULL), 0);
    char url[160];
    dlock_config *cfg = dlock_config_new();
    dlock_client *c = NULL;

    snprintf(url, sizeof(url), "redis://:wrongpw@127.0.0.1:%d", sec.port);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_EAUTH);
    assert_null(strstr(dlock_last_error(), "wrongpw"));

    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d/3", sec.port);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_client_name(cfg, "dlock-test"), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "in-db-3", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    redisContext *adm = th_admin(&sec);
    redisReply *r = redisCommand(adm, "AUTH s3cret");
    freeReplyObject(r);
    r = redisCommand(adm, "SELECT 3");
    freeReplyObject(r);
    r = redisCommand(adm, "EXISTS in-db-3");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    r = redisCommand(adm, "CLIENT LIST");
    char want[128];
    snprintf(want, sizeof(want), "name=dlock|%s|", dlock_client_id(c));
    assert_non_null(strstr(r->str, want));
    assert_non_null(strstr(r->str, "|dlock-test "));
    freeReplyObject(r);
    redisFree(adm);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* No password for a server that wants one: refused at open, not at the
     * first lock call. */
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", sec.port);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), "NOAUTH"));

    /* A database the server does not have. */
    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d/999", sec.port);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), "database"));
    dlock_config_free(cfg);
    th_redis_destroy(&sec);
}

typedef struct log_sink {
    pthread_mutex_t mu;
    int lines;
    int leaked;
    int warnings;
    int setname;
} log_sink;

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    log_sink *s = ud;
    pthread_mutex_lock(&s->mu);
    s->lines++;
    s->warnings += level <= DLOCK_LOG_WARN;
    s->leaked += strstr(msg, "Pa55word") != NULL;
    s->setname += strstr(msg, "CLIENT SETNAME") != NULL;
    pthread_mutex_unlock(&s->mu);
}

static void *hold_briefly(void *arg)
{
    dlock_lock *l = arg;
    if (dlock_lock_try(l, 5000, 2000) == DLOCK_OK)
        dlock_lock_release(l);
    return NULL;
}

/* The log callback hears about connections coming and going, and never sees
 * the password. */
/* Every connection of a client is named dlock|<uuid>|<host>|<pid>|<label>:
 * the pool's, the pub/sub one and the renewal one; a label set at run time
 * reaches a pooled connection before the call returns, and the renewal
 * connection with its next renewal. */
static void test_connections_carry_client_identity(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* counts the connections of one server */
    dlock_client *c = th_client(&srv, 300);
    char prefix[160], host[65] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(prefix, sizeof(prefix), "name=dlock|%s|%s|%ld|", dlock_client_id(c), host,
             (long)getpid());
    char name[128];
    th_name(name, sizeof(name), "named");
    dlock_lock *l, *other;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli, name, "x:1", &other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 400), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);   /* waited: pub/sub */
    th_sleep_ms(300);                                                     /* a renewal */
    redisReply *r = th_cmd(&srv, "CLIENT LIST");
    int named = 0;
    for (char *p = strstr(r->str, prefix); p; p = strstr(p + 1, prefix))
        named++;
    freeReplyObject(r);
    assert_true(named >= 3);   /* pooled, pub/sub, renewal */
    assert_int_equal(dlock_client_set_label(c, "run:42:job"), DLOCK_OK);
    r = th_cmd(&srv, "CLIENT LIST");
    char labelled[200];
    snprintf(labelled, sizeof(labelled), "%srun:42:job ", prefix);
    assert_non_null(strstr(r->str, labelled));
    freeReplyObject(r);
    /* The renewal connection is renamed at its next use (a renewal every
     * 100 ms; far slower under valgrind). */
    named = 0;
    for (int64_t end = th_now_ms() + 3000 * th_slack(); named < 2 && th_now_ms() < end;) {
        th_sleep_ms(50);
        r = th_cmd(&srv, "CLIENT LIST");
        named = 0;
        for (char *p = strstr(r->str, labelled); p; p = strstr(p + 1, labelled))
            named++;
        freeReplyObject(r);
    }
    assert_true(named >= 2);   /* the renewal connection renamed too */
    assert_int_equal(dlock_client_set_label(c, "has space"), DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_label(NULL, "x"), DLOCK_EINVAL);
    assert_int_equal(dlock_client_set_label(c, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(other);
    dlock_client_close(c);
}

/* A user whose ACL refuses CLIENT SETNAME still connects and locks, on every
 * connection (pooled, pub/sub, renewal); the client says so once. */
static void test_setname_refused_is_not_fatal(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* a test of one server (a proxy before it, its ACL, its address) */
    freeReplyObject(th_cmd(&srv, "ACL SETUSER noname on >pw ~* &* +@all -client|setname"));
    char url[160];
    snprintf(url, sizeof(url), "redis://noname:pw@127.0.0.1:%d", srv.port);
    log_sink sink = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, on_log, &sink, DLOCK_LOG_WARN), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 300), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[128];
    th_name(name, sizeof(name), "noname");
    dlock_lock *l, *other;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli, name, "x:1", &other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 300), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);   /* waited: pub/sub */
    th_sleep_ms(400);                                                     /* renewals */
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_client_set_label(c, "later"), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(other);
    dlock_client_close(c);
    assert_int_equal(sink.setname, 1);
    freeReplyObject(th_cmd(&srv, "ACL DELUSER noname"));
}

static void test_log_callback_never_shows_password(void **state)
{
    (void)state;
    th_redis sec;
    assert_int_equal(th_redis_start(&sec, "--requirepass", "Pa55word", NULL), 0);
    char url[160];
    snprintf(url, sizeof(url), "redis://default:Pa55word@127.0.0.1:%d", sec.port);
    log_sink sink = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, on_log, &sink, DLOCK_LOG_DEBUG), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 600), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "logged", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    pthread_t t;
    pthread_create(&t, NULL, hold_briefly, l);   /* brings up the pub/sub connection */
    th_sleep_ms(300);
    assert_int_equal(th_redis_restart(&sec), 0);   /* both io connections drop */
    th_sleep_ms(1500);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);   /* lost with the restart */
    pthread_join(t, NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
    assert_true(sink.lines > 0);
    assert_true(sink.warnings > 0);
    assert_int_equal(sink.leaked, 0);
    th_redis_destroy(&sec);
}

static void test_unix_socket(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* talks to its server over a unix socket */
    char url[400];
    snprintf(url, sizeof(url), "unix://%s?db=1", srv.sock);
    dlock_client *c = th_client_url(url, 0);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "over-unix", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 3000), DLOCK_OK);
    int held = 0;
    assert_int_equal(dlock_lock_is_held(l, &held), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The reply to a release is lost; the client retries on a new connection and
 * gets the first attempt's answer from the unlock latch, not DLOCK_ENOTOWNER. */
static void test_release_retry_uses_latch(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* a test of one server (a proxy before it, its ACL, its address) */
    th_proxy *px = th_proxy_start(srv.port);
    assert_non_null(px);
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, url);
    dlock_config_set_command_timeout(cfg, 300);
    dlock_config_set_retry(cfg, 3, 50);
    dlock_config_set_pool_size(cfg, 1);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "latch"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 60000), DLOCK_OK);
    th_proxy_swallow_replies(px);   /* the pooled connection now loses replies */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    /* The latch that answered the retry is there, with a short expiry. */
    redisReply *r = th_cmd(&srv, "KEYS redisson_unlock_latch:{%s}:*", name);
    assert_int_equal(r->elements, 1);
    assert_int_equal(strlen(r->element[0]->str), strlen("redisson_unlock_latch:{}:") +
                                                      strlen(name) + 32);
    long long px_ttl = th_int(&srv, "PTTL %s", r->element[0]->str);
    assert_true(px_ttl > 0 && px_ttl <= 60000);
    freeReplyObject(r);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* An acquire whose reply is lost is not resent (it would count a hold twice):
 * the caller learns the outcome is unknown. */
static void test_acquire_lost_reply_is_unknown(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* puts a proxy before one server */
    th_proxy *px = th_proxy_start(srv.port);
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, url);
    dlock_config_set_command_timeout(cfg, 300);
    dlock_config_set_retry(cfg, 3, 50);
    dlock_config_set_pool_size(cfg, 1);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "unknown"), &l), DLOCK_OK);
    th_proxy_swallow_replies(px);
    assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_EUNKNOWN);
    assert_non_null(strstr(dlock_last_error(), "may have run"));
    /* It did run, once: one hold, not two, and it expires with its lease. */
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    int64_t n = 0;
    assert_int_equal(dlock_lock_hold_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* ------------------------------------------------------- review fixes */

static dlock_client *proxied_client(th_proxy *px, int64_t cmd_timeout)
{
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, url);
    dlock_config_set_command_timeout(cfg, cmd_timeout);
    dlock_config_set_retry(cfg, 3, 50);
    dlock_config_set_pool_size(cfg, 1);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

struct call_arg {
    dlock_lock *l;
    int rc;
};

static void *acquire_in_thread(void *arg)
{
    struct call_arg *a = arg;
    a->rc = dlock_lock_acquire(a->l, 5000);
    return NULL;
}

/* The connection drops after the acquire was written (Redis ran it): the
 * acquire is not resent, so the hold is counted once. */
static void test_acquire_reset_after_send_counts_once(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* a test of one server (a proxy before it, its ACL, its address) */
    th_proxy *px = th_proxy_start(srv.port);
    dlock_client *c = proxied_client(px, 2000);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "reset"), &l), DLOCK_OK);
    th_proxy_swallow_replies(px);
    struct call_arg a = {l, -99};
    pthread_t t;
    pthread_create(&t, NULL, acquire_in_thread, &a);
    th_sleep_ms(200);   /* the acquire has run on Redis; its reply is held back */
    th_proxy_cut(px);   /* then the connection resets */
    pthread_join(t, NULL);
    assert_int_equal(a.rc, DLOCK_EUNKNOWN);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    redisReply *r = th_cmd(&srv, "HVALS %s", name);
    assert_string_equal(r->element[0]->str, "1");
    freeReplyObject(r);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* A force release whose reply is lost is not resent: its PUBLISH may have
 * handed the lock to a waiter, whose hold a second DEL would destroy. */
static void test_force_release_not_resent(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* a test of one server (a proxy before it, its ACL, its address) */
    th_proxy *px = th_proxy_start(srv.port);
    dlock_client *c = proxied_client(px, 300);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "force-once"), &l), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "HSET %s old:1 1", name));
    th_proxy_swallow_replies(px);
    int was = -1;
    assert_int_equal(dlock_lock_force_release(l, &was), DLOCK_EUNKNOWN);
    assert_int_equal(was, -1);   /* not written on failure */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* A server that accepts connections and never answers: the handshake (AUTH)
 * times out under the connect timeout instead of hanging. */
static void test_handshake_times_out(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 8), 0);   /* the kernel completes connects; nobody answers */
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char url[128];
    snprintf(url, sizeof(url), "redis://:pw@127.0.0.1:%d", ntohs(sa.sin_port));
    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, url);
    dlock_config_set_connect_timeout(cfg, 300);
    dlock_client *c = NULL;
    int64_t t0 = th_now_ms();
    int rc = dlock_client_open(&c, cfg);
    int64_t took = th_now_ms() - t0;
    assert_true(rc == DLOCK_ECONN || rc == DLOCK_ECMDTIMEOUT);
    assert_null(c);
    assert_true(took < 2000 * th_slack());
    dlock_config_free(cfg);
    close(fd);
}

/* A child forked after the parent released locks has its own request ids and
 * thread id: its releases really release. */
static void test_forked_child_releases(void **state)
{
    (void)state;
#ifdef __SANITIZE_THREAD__
    skip();   /* ThreadSanitizer cannot start threads in a child of a threaded process */
#endif
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, th_name(name, sizeof(name), "fork"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);   /* uses this thread's random state */
    dlock_lock_free(l);
    for (int child = 0; child < 2; child++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Only async-signal-safe work is strictly allowed here, but a fresh
             * client in a single-threaded child is what users do. */
            dlock_config *cfg = dlock_config_new();
            dlock_config_set_url(cfg, srv.url);
            dlock_client *c;
            if (dlock_client_open(&c, cfg) != DLOCK_OK)
                _exit(2);
            dlock_lock *cl;
            dlock_lock_get(c, name, &cl);
            int ok = dlock_lock_acquire(cl, 5000) == DLOCK_OK &&
                     dlock_lock_acquire(cl, 5000) == DLOCK_OK &&
                     dlock_lock_release(cl) == DLOCK_OK && dlock_lock_release(cl) == DLOCK_OK;
            int64_t n = -1;
            dlock_lock_hold_count(cl, &n);
            dlock_lock_free(cl);
            dlock_client_close(c);
            dlock_config_free(cfg);
            _exit(ok && n == 0 ? 0 : 1);
        }
        int st;
        waitpid(pid, &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant_hold_counts),
        cmocka_unit_test(test_other_thread_is_not_owner),
        cmocka_unit_test(test_lease_expires),
        cmocka_unit_test(test_lease_is_not_renewed),
        cmocka_unit_test(test_ttl_and_is_locked),
        cmocka_unit_test(test_is_held_by_owner_id),
        cmocka_unit_test(test_force_release),
        cmocka_unit_test(test_fencing_tokens_increase),
        cmocka_unit_test(test_fencing_tokens_survive_restart),
        cmocka_unit_test(test_run_helper),
        cmocka_unit_test(test_explicit_owner_moves_between_threads),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_bad_durations),
        cmocka_unit_test(test_wrong_type_key),
        cmocka_unit_test(test_unreachable_at_open),
        cmocka_unit_test(test_silent_listener_at_open),
        cmocka_unit_test(test_loading_server_at_open),
        cmocka_unit_test(test_auth_and_db_and_name),
        cmocka_unit_test(test_unix_socket),
        cmocka_unit_test(test_connections_carry_client_identity),
        cmocka_unit_test(test_setname_refused_is_not_fatal),
        cmocka_unit_test(test_log_callback_never_shows_password),
        cmocka_unit_test(test_release_retry_uses_latch),
        cmocka_unit_test(test_acquire_lost_reply_is_unknown),
        cmocka_unit_test(test_acquire_reset_after_send_counts_once),
        cmocka_unit_test(test_force_release_not_resent),
        cmocka_unit_test(test_handshake_times_out),
        cmocka_unit_test(test_forked_child_releases),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
