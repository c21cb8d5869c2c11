/* Revocation heard at once: a watchdog hold whose key someone else deletes or
 * rewrites is reported lost within milliseconds (client tracking redirected
 * to the client's listener), not at its next renewal; the holder's own
 * releases and reentries are not losses; with tracking off, refused, or its
 * listener cut, losses are still found (by the renewals, or by the recheck
 * when tracking is back). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

#define WD 6000   /* watchdog timeout: renewals every 2 s, so a loss heard in
                     milliseconds was not found by a renewal */
#define HEARD_MS 50

typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    dlock_lost_reason reason;
    dlock_lost_cause cause;  /* dlock_last_lost_cause() in the callback */
    char name[128];
    int64_t at;
} lost_log;

#define LOST_LOG_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, "", 0}

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)owner;
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->reason = reason;
    g->cause = dlock_last_lost_cause();
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->at = th_now_ms();
    pthread_mutex_unlock(&g->mu);
}

static int calls(lost_log *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* Waits up to `within` ms for the n-th loss; returns when it came, or 0. */
static int64_t await_lost(lost_log *g, int n, int64_t within)
{
    int64_t until = th_now_ms() + within;
    while (th_now_ms() < until) {
        pthread_mutex_lock(&g->mu);
        int64_t at = g->calls >= n ? g->at : 0;
        pthread_mutex_unlock(&g->mu);
        if (at)
            return at;
        th_sleep_ms(1);
    }
    return 0;
}

static dlock_client *client(const char *url, lost_log *g, int revocation)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD), DLOCK_OK);
    assert_int_equal(dlock_config_set_revocation(cfg, revocation), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 1, 100), DLOCK_OK);
    if (g)
        assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, g), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

/* Until tracking is on and the hold's key is tracked (its first renewal
 * answered): a change made before would be a change before the hold. */
static void await_tracked(dlock_client *c)
{
    int64_t until = th_now_ms() + 2000 * th_slack();
    while (th_now_ms() < until) {
        if (dlock__watchdog_tracking(c->wd) == 2)
            return;
        th_sleep_ms(1);
    }
    fail_msg("tracking not on after 2 s (state %d)", dlock__watchdog_tracking(c->wd));
}

static void expect_heard(lost_log *g, int n, int64_t changed_at, const char *what)
{
    int64_t at = await_lost(g, n, 1000 * th_slack());
    if (!at)
        fail_msg("%s: no loss reported within 1 s", what);
    if (at - changed_at > HEARD_MS * th_slack())
        fail_msg("%s: loss reported %lld ms after the change (bound %lld)", what,
                 (long long)(at - changed_at), (long long)(HEARD_MS * th_slack()));
    assert_int_equal(g->reason, DLOCK_LOST_GONE);
}

/* Another client's DEL: heard in milliseconds, reported once; the release
 * then says the lock was not held, and nothing is renewed any more. */
static void test_del_heard_at_once(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 1);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "del"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    await_tracked(c);
    int64_t t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    expect_heard(&g, 1, t0, "DEL");
    assert_string_equal(g.name, name);
    assert_int_equal(g.cause, DLOCK_CAUSE_DELETED);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(200);
    assert_int_equal(calls(&g), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A force release by another dlock client, a rewrite of the key (another
 * type, another owner's hash), FLUSHALL: each heard at once. */
static void test_other_changes_heard(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 1);
    dlock_client *other = client(srv.url, NULL, 1);
    char name[128];
    dlock_lock *l, *lo;
    int n = 0;
    for (int how = 0; how < 4; how++) {
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "chg"), &l), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        await_tracked(c);
        int64_t t0 = th_now_ms();
        int was = 0;
        switch (how) {
        case 0:
            assert_int_equal(dlock_lock_get(other, name, &lo), DLOCK_OK);
            assert_int_equal(dlock_lock_force_release(lo, &was), DLOCK_OK);
            assert_int_equal(was, 1);
            dlock_lock_free(lo);
            break;
        case 1:
            freeReplyObject(th_cmd(&srv, "SET %s not-a-lock", name));
            break;
        case 2:
            freeReplyObject(th_cmd(&srv, "EVAL %s 1 %s", "redis.call('del', KEYS[1]) "
                                   "redis.call('hset', KEYS[1], 'someone:1', 1)", name));
            break;
        default:
            freeReplyObject(th_cmd(&srv, "FLUSHALL"));
            break;
        }
        static const char *const what[] = {"force release", "SET", "another owner", "FLUSHALL"};
        expect_heard(&g, ++n, t0, what[how]);
        /* FLUSHALL: an invalidation of every key; the others are deletions. */
        if (g.cause != (how == 3 ? DLOCK_CAUSE_FLUSHED : DLOCK_CAUSE_DELETED))
            fail_msg("%s: cause %s", what[how], dlock_lost_cause_str(g.cause));
        dlock_lock_free(l);
        freeReplyObject(th_cmd(&srv, "DEL %s", name));
    }
    dlock_client_close(other);
    dlock_client_close(c);
}

/* The holder's own reentries and releases, another owner's failed tries, and
 * reads are not losses; a hold that outlives them is still heard at once. */
static void test_own_changes_are_not_losses(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 1);
    dlock_client *other = client(srv.url, NULL, 1);
    char name[128];
    dlock_lock *l, *lo;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "own"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(other, name, &lo), DLOCK_OK);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);   /* reentry */
        assert_int_equal(dlock_lock_try(lo, 0, 1000), DLOCK_ETIMEDOUT);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(calls(&g), 0);
    await_tracked(c);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);   /* reentry: tracked again */
    th_sleep_ms(100);
    assert_int_equal(calls(&g), 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    expect_heard(&g, 1, t0, "DEL after reentries");
    dlock_lock_free(lo);
    dlock_lock_free(l);
    dlock_client_close(other);
    dlock_client_close(c);
}

static uint64_t renewals(dlock_client *c)
{
    dlock_stats st;
    assert_int_equal(dlock_client_stats(c, &st, sizeof(st)), DLOCK_OK);
    return st.renewal_roundtrips;
}

/* Tracking on and the scripts loaded: a hold of another name taken until it
 * is tracked, released, and the invalidation of that release heard. */
static void warm_up(dlock_client *c)
{
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "warm"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    await_tracked(c);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    th_sleep_ms(50 * th_slack());
}

/* A hold released before it is DLOCK__WD_REGISTER_AGE_MS old is never
 * registered: a short hold costs Redis its acquire and its release, no
 * renewal (and then no invalidation either). Counted per cycle (a renewal
 * is counted when sent, and a release waits for one in flight): only a
 * cycle the machine made slow (its hold may have come of age: the watchdog
 * counts whole ms) may have cost one. */
static void test_short_holds_not_registered(void **state)
{
    (void)state;
    enum { N = 500 };
    dlock_client *c = client(srv.url, NULL, 1);
    char name[128];
    dlock_lock *l[N];
    for (int i = 0; i < N; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "short%d", i);
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), tag), &l[i]), DLOCK_OK);
    }
    warm_up(c);
    int slow = 0, registered = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r0 = renewals(c);
        int64_t t0 = dlock__now_us();
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        int fast = dlock__now_us() - t0 < (DLOCK__WD_REGISTER_AGE_MS - 1) * 1000;
        slow += !fast;
        if (renewals(c) != r0) {
            registered++;
            if (fast)
                fail_msg("cycle %d: a hold released %lld us after its acquire began was "
                         "renewed", i, (long long)(dlock__now_us() - t0));
        }
    }
    print_message("%d of %d cycles slow enough to be registered, %d were\n", slow, N, registered);
    for (int i = 0; i < N; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
}

/* A hold re-entered again and again (each reentry a fresh acquisition, its
 * age counted again) is still registered soon: kept young, it would never
 * be tracked, and someone else's DEL would go unheard. */
static void test_reentered_hold_registered(void **state)
{
    (void)state;
    dlock_client *c = client(srv.url, NULL, 1);
    char name[128];
    dlock_lock *l;
    warm_up(c);
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "reent"), &l), DLOCK_OK);
    uint64_t r0 = renewals(c);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    /* Re-entered every ms for 100 ms: no gap of 3 ms on a quiet machine. */
    for (int64_t until = th_now_ms() + 100; th_now_ms() < until;) {
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        th_sleep_ms(1);
    }
    if (renewals(c) == r0)
        fail_msg("a hold re-entered for 100 ms was never renewed (not tracked)");
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Every kind the watchdog renews: a fair lock, a read lock shared with
 * another reader (whose coming and going changes the hash: not a loss), a
 * write lock, a watchdog permit. */
static void test_every_kind(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 1);
    dlock_client *other = client(srv.url, NULL, 1);
    char name[128];
    int n = 0;
    for (int kind = 0; kind < 3; kind++) {
        dlock_lock *l;
        th_name(name, sizeof(name), "kind");
        int rc = kind == 0   ? dlock_fair_lock_get(c, name, &l)
                 : kind == 1 ? dlock_read_lock_get(c, name, &l)
                             : dlock_write_lock_get(c, name, &l);
        assert_int_equal(rc, DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        await_tracked(c);
        if (kind == 1) {
            dlock_lock *r2;
            assert_int_equal(dlock_read_lock_get(other, name, &r2), DLOCK_OK);
            assert_int_equal(dlock_lock_acquire(r2, 5000), DLOCK_OK);
            assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
            dlock_lock_free(r2);
            th_sleep_ms(100);
            assert_int_equal(calls(&g), n);
        }
        int64_t t0 = th_now_ms();
        assert_int_equal(th_int(&srv, "DEL %s", name), 1);
        static const char *const what[] = {"fair lock", "read lock", "write lock"};
        expect_heard(&g, ++n, t0, what[kind]);
        dlock_lock_free(l);
    }
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(c, th_name(name, sizeof(name), "perm"), &p),
                     DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 2), DLOCK_OK);
    char id[DLOCK_PERMIT_ID_BUFSIZE], leases[160];
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)), DLOCK_OK);
    await_tracked(c);
    snprintf(leases, sizeof(leases), "{%s}:timeout", name);
    int64_t t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", leases), 1);
    expect_heard(&g, ++n, t0, "permit");
    dlock_permit_semaphore_free(p);
    dlock_client_close(other);
    dlock_client_close(c);
}

/* Tracking off (configured): a DEL is found by the next renewal only. Its
 * cause: the renewal connection samples the node's counters as it comes up,
 * before its first renewal, so a DEL is told by elimination from the first
 * loss on. */
static void test_off_falls_back_to_renewals(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 0);
    char name[128], name2[128];
    dlock_lock *l, *l2;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "off"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(name2, sizeof(name2), "off2"), &l2), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l2, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(100);
    assert_int_equal(dlock__watchdog_tracking(c->wd), 0);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    int64_t at = await_lost(&g, 1, WD * th_slack());
    assert_true(at > 0);   /* found by a renewal, within a period and a half */
    assert_string_equal(g.name, name);
    assert_int_equal(g.cause, DLOCK_CAUSE_DELETED);
    assert_int_equal(th_int(&srv, "DEL %s", name2), 1);
    assert_true(await_lost(&g, 2, WD * th_slack()) > 0);
    assert_string_equal(g.name, name2);
    assert_int_equal(g.cause, DLOCK_CAUSE_DELETED);   /* no tracking: by elimination */
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
}

/* The listener cut (CLIENT KILL): a DEL made while it is away is found when
 * tracking is back (every hold rechecked), well before the next renewal;
 * later changes are heard at once again. */
static void test_listener_cut(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(srv.url, &g, 1);
    char a[128], b[128];
    dlock_lock *la, *lb;
    assert_int_equal(dlock_lock_get(c, th_name(a, sizeof(a), "cutA"), &la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(b, sizeof(b), "cutB"), &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    await_tracked(c);
    /* Kill every pub/sub connection and delete a at once, in one script-less
     * pipeline: the invalidation has nowhere to go. */
    redisContext *adm = th_admin(&srv);
    redisAppendCommand(adm, "CLIENT KILL TYPE pubsub");
    redisAppendCommand(adm, "DEL %s", a);
    redisReply *r;
    int64_t t0 = th_now_ms();
    for (int i = 0; i < 2; i++) {
        assert_int_equal(redisGetReply(adm, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    redisFree(adm);
    int64_t at = await_lost(&g, 1, WD * th_slack());
    assert_true(at > 0);
    if (at - t0 > 1500 * th_slack())
        fail_msg("a DEL during the listener's absence found after %lld ms",
                 (long long)(at - t0));
    assert_string_equal(g.name, a);
    await_tracked(c);
    t0 = th_now_ms();
    assert_int_equal(th_int(&srv, "DEL %s", b), 1);
    expect_heard(&g, 2, t0, "DEL after the listener came back");
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* A user whose ACL refuses CLIENT: tracking refused, logged; losses are
 * found by renewals, locks work as before. */
static void test_refused_by_acl(void **state)
{
    (void)state;
    freeReplyObject(th_cmd(&srv, "ACL SETUSER limited on >pw ~* &* +@all -client"));
    char url[160];
    snprintf(url, sizeof(url), "redis://limited:pw@127.0.0.1:%d", srv.port);
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(url, &g, 1);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "acl"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(dlock__watchdog_tracking(c->wd), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_true(await_lost(&g, 1, WD * th_slack()) > 0);
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    dlock_lock_free(l);
    dlock_client_close(c);
    freeReplyObject(th_cmd(&srv, "ACL DELUSER limited"));
}

static void test_config(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_revocation(cfg, 2), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_revocation(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_revocation(NULL, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_revocation(cfg, 0), DLOCK_OK);
    dlock_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_del_heard_at_once),
        cmocka_unit_test(test_other_changes_heard),
        cmocka_unit_test(test_own_changes_are_not_losses),
        cmocka_unit_test(test_short_holds_not_registered),
        cmocka_unit_test(test_reentered_hold_registered),
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_off_falls_back_to_renewals),
        cmocka_unit_test(test_listener_cut),
        cmocka_unit_test(test_refused_by_acl),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
