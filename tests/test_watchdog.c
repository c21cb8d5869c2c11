/* The watchdog: renewal while held, batching, release leaving the schedule,
 * a killed holder's lock freed by expiry, and losses reported once. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"
#include "proxy.h"

#define WD 1500   /* watchdog timeout for these tests: renewal every 500 ms */

/* Lost-callback recorder. */
typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    dlock_lost_reason reason;
    char name[256];
    int64_t at;
} lost_log;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)owner;
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->reason = reason;
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->at = th_now_ms();
    pthread_mutex_unlock(&g->mu);
}

static int lost_calls(lost_log *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* Waits up to ms x th_slack() for a loss report. */
static int await_lost(lost_log *g, int64_t ms)
{
    int64_t until = th_now_ms() + ms * th_slack();
    while (lost_calls(g) == 0 && th_now_ms() < until)
        th_sleep_ms(5);
    return lost_calls(g);
}

static long long evalsha_calls(void)
{
    redisReply *r = th_cmd(&srv, "INFO commandstats");
    const char *p = strstr(r->str, "cmdstat_evalsha:calls=");
    long long n = p ? atoll(p + 22) : 0;
    freeReplyObject(r);
    return n;
}

static dlock_client *client_with(const char *url, lost_log *g, int64_t cmd_timeout)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD), DLOCK_OK);
    if (g)
        assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, g), DLOCK_OK);
    if (cmd_timeout)
        assert_int_equal(dlock_config_set_command_timeout(cfg, cmd_timeout), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 1, 100), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

/* ------------------------------------------------------------------ tests */

static void test_held_lock_never_expires(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "keep"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    int64_t until = th_now_ms() + 6000;
    long long min_ttl = WD;
    while (th_now_ms() < until) {
        long long ttl = th_int(&srv, "PTTL %s", name);
        if (ttl < min_ttl)
            min_ttl = ttl;
        assert_true(ttl > 0);
        th_sleep_ms(50);
    }
    /* Renewed every 500-750 ms to 1500: never below a third of the timeout or so. */
    assert_true(min_ttl > 300);
    assert_int_equal(lost_calls(&g), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* 250 held locks are renewed in batches of up to 100 per script: about three
 * scripts a period, not 250. */
static void test_renewals_are_batched(void **state)
{
    (void)state;
    dlock_client *c = client_with(srv.url, NULL, 0);
    enum { N = 250 };
    dlock_lock *ls[N];
    char name[128];
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "batch"), &ls[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(ls[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    assert_int_equal(dlock__watchdog_count(c->wd), N);
    th_sleep_ms(600);   /* let the acquisitions age into one renewal group */
    long long before = evalsha_calls();
    th_sleep_ms(2000);  /* four periods */
    long long renew_scripts = evalsha_calls() - before;
    /* Each period renews every lock once: 3 scripts of <= 100. Allow the odd
     * period where a group splits across ticks. */
    if (renew_scripts < 6 || renew_scripts > 20)
        fail_msg("%lld renewal scripts for 250 locks over four periods", renew_scripts);
    for (int i = 0; i < N; i++) {
        assert_true(th_int(&srv, "PTTL %s", dlock_lock_name(ls[i])) > 0);
        assert_int_equal(dlock_lock_release(ls[i]), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    /* Nothing left to renew: no more scripts. */
    before = evalsha_calls();
    th_sleep_ms(1200);
    assert_int_equal(evalsha_calls() - before, 0);
    dlock_client_close(c);
}

/* A holder process stopped (SIGSTOP) past its lease, then continued: the loss
 * it reports says its own process was paused, not that Redis was away. */
static void test_paused_holder_reports_pause(void **state)
{
    (void)state;
    char name[128], wd[16], line[64];
    th_name(name, sizeof(name), "paused");
    snprintf(wd, sizeof(wd), "%d", WD);
    int fd;
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "hold", srv.url, name, wd, NULL);
    assert_true(pid > 0);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "held");
    kill(pid, SIGSTOP);
    th_sleep_ms(2 * WD);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);   /* Redis let it go */
    kill(pid, SIGCONT);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 5000), 0);
    char want[16];
    snprintf(want, sizeof(want), "lost %d", (int)DLOCK_LOST_PAUSED);
    assert_string_equal(line, want);
    kill(pid, SIGKILL);
    th_wait(pid, 5000);
    close(fd);
}

/* A holder process killed with SIGKILL: its lock frees within the watchdog
 * timeout + 1 s, and a waiter here gets it. */
static void test_killed_holder_frees_lock(void **state)
{
    (void)state;
    char name[128], wd[16], line[64];
    th_name(name, sizeof(name), "killed");
    snprintf(wd, sizeof(wd), "%d", WD);
    int fd;
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "hold", srv.url, name, wd, NULL);
    assert_true(pid > 0);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "held");
    close(fd);
    th_sleep_ms(2 * WD);   /* it has been renewing meanwhile */
    assert_true(th_int(&srv, "PTTL %s", name) > 0);

    dlock_client *c = client_with(srv.url, NULL, 0);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    kill(pid, SIGKILL);
    int64_t killed = th_now_ms();
    assert_int_equal(th_wait(pid, 5000), 128 + SIGKILL);
    assert_int_equal(dlock_lock_try(l, 10000, DLOCK_WATCHDOG), DLOCK_OK);
    int64_t freed = th_now_ms() - killed;
    if (freed > WD + 1000 * th_slack())
        fail_msg("the dead holder's lock took %lld ms to free", (long long)freed);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Someone deletes the key: the next renewal finds it gone and reports it once,
 * to the lock's own callback rather than the client's. */
static void test_deleted_key_is_reported_lost(void **state)
{
    (void)state;
    lost_log client_g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    lost_log lock_g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &client_g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "deleted"), &l), DLOCK_OK);
    dlock_lock_set_lost_callback(l, on_lost, &lock_g);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(await_lost(&lock_g, WD + 500), 1);
    assert_int_equal(lock_g.reason, DLOCK_LOST_GONE);
    assert_string_equal(lock_g.name, name);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(WD);   /* reported once, and never renewed again */
    assert_int_equal(lost_calls(&lock_g), 1);
    assert_int_equal(lost_calls(&client_g), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Redis restarted (no persistence) under a held lock: the lost callback fires
 * once, and the release answers DLOCK_ENOTOWNER. */
static void test_restart_loses_lock(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "restart"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(WD / 2);
    assert_int_equal(th_redis_restart(&srv), 0);
    assert_int_equal(await_lost(&g, 3 * WD), 1);
    assert_string_equal(g.name, name);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    /* The client carries on: a new hold is renewed on the new server. */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(2 * WD);
    assert_true(th_int(&srv, "PTTL %s", name) > 0);
    assert_int_equal(lost_calls(&g), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A release that finds a watchdog hold gone (before any renewal could) also
 * reports the loss, once, besides answering DLOCK_ENOTOWNER. */
static void test_release_of_lost_hold_reports_it(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "lost-at-release"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* gone before any renewal */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    assert_int_equal(await_lost(&g, 1000), 1);
    assert_true(g.at - t0 < 300 * th_slack());   /* from the release, not the next renewal */
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 1);
    /* A lease hold is not the watchdog's: its ENOTOWNER is the only report. */
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    th_sleep_ms(300);
    assert_int_equal(lost_calls(&g), 1);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Redis unreachable (a partition): the holder is told it lost the lock when
 * its lease would run out, measured from before the last renewal was sent. */
static void test_unreachable_reports_lost_in_time(void **state)
{
    (void)state;
    th_proxy *px = th_proxy_start(srv.port);
    char url[128], name[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(url, &g, 400);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "partition"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(WD);   /* renewals flowing */
    th_proxy_blackhole(px, 1);
    int64_t cut = th_now_ms();
    /* Watch the key on the server directly: when does it expire? */
    int64_t expired = 0;
    int64_t until = cut + 3 * WD * th_slack();
    while (th_now_ms() < until && !expired) {
        if (th_int(&srv, "EXISTS %s", name) == 0)
            expired = th_now_ms();
        else
            th_sleep_ms(2);
    }
    assert_true(expired > 0);
    assert_int_equal(await_lost(&g, WD), 1);
    assert_int_equal(g.reason, DLOCK_LOST_UNREACHABLE);
    /* Reported before the server let the lock go, with the watchdog's margin
     * (WD/20 = 75 ms) to spare for a busy machine. */
    if (g.at > expired)
        fail_msg("lost reported %lld ms after the server expired the lock",
                 (long long)(g.at - expired));
    assert_true(g.at - cut <= WD * th_slack());
    th_proxy_blackhole(px, 0);
    th_proxy_cut(px);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    assert_int_equal(lost_calls(&g), 1);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* Releases and leases never produce a lost report. */
static void test_release_is_not_a_loss(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "cycles"), &l), DLOCK_OK);
    int64_t until = th_now_ms() + 2 * WD;
    int cycles = 0;
    while (th_now_ms() < until) {
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        cycles++;
    }
    assert_true(cycles > 10);
    /* A lease lock does not enter the schedule at all. */
    assert_int_equal(dlock_lock_acquire(l, 200), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 0);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    /* Force release through this client stops the renewal without a report. */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_force_release(l, NULL), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The watchdog timeout (and command timeout) of the proxied holders, for a
 * slack k taken once: long enough that the answers the proxy holds back
 * (a few hundred ms x k) never come near the loss deadline nor time out. */
#define WD_LONG(k) (6000 * (k))

/* A client through a new proxy *pxp (the only server: skipped when
 * DLOCK_TEST_DEPLOY is set), with revocation as asked, a lock held on the
 * watchdog (WD_LONG(k)). */
static dlock_client *proxied_holder(th_proxy **pxp, lost_log *g, int revocation, int64_t k,
                                    char *name, size_t nsize, const char *tag, dlock_lock **l)
{
    if (getenv("DLOCK_TEST_DEPLOY") && *getenv("DLOCK_TEST_DEPLOY"))
        skip();
    th_proxy *px = *pxp = th_proxy_start(srv.port);
    assert_non_null(px);
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD_LONG(k)), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, WD_LONG(k)), DLOCK_OK);
    assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, g), DLOCK_OK);
    assert_int_equal(dlock_config_set_revocation(cfg, revocation), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    assert_int_equal(dlock_lock_get(c, th_name(name, nsize, tag), l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(*l, DLOCK_WATCHDOG), DLOCK_OK);
    return c;
}

/* Forces l's release through its own client (behind px) while the proxy
 * holds the answer back delay_ms: the release returns, its hold is out of
 * the schedule, and no loss is reported then or later (the proxy matched
 * `delayed` requests in all). Frees l, c and px. */
static void force_with_late_answer(th_proxy *px, dlock_client *c, dlock_lock *l, lost_log *g,
                                   int delay_ms, int delayed)
{
    char chan[200];
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", dlock_lock_name(l));
    th_proxy_delay_reply_match(px, chan, delay_ms);
    assert_int_equal(dlock_lock_force_release(l, NULL), DLOCK_OK);
    assert_int_equal(th_proxy_delayed(px), delayed);
    th_proxy_delay_match(px, NULL, 0);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_sleep_ms(WD / 3);
    assert_int_equal(lost_calls(g), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* The force release's own answer comes late while client tracking reports
 * the key deleted: the recheck that report starts finds the key gone before
 * the release is read, and must not call it a loss. */
static void test_force_release_beside_recheck(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    char name[128];
    dlock_lock *l;
    th_proxy *px;
    const int64_t k = th_slack();
    dlock_client *c = proxied_holder(&px, &g, 1, k, name, sizeof(name), "force-recheck", &l);
    /* Registered: Redis tracks the key for the renewal connection. */
    int64_t until = th_now_ms() + 3000 * k;
    while (dlock__watchdog_tracking(c->wd) != 2 && th_now_ms() < until)
        th_sleep_ms(2);
    assert_int_equal(dlock__watchdog_tracking(c->wd), 2);
    force_with_late_answer(px, c, l, &g, (int)(300 * k), 1);
}

/* A renewal sent before the force release runs after it (the proxy holds
 * the renewal's request) and answers "not held" while the release's own
 * answer is still on its way: not a loss either. Revocation off, so that
 * only the renewal sees the key gone. */
static void test_force_release_beside_renewal(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    char name[128];
    dlock_lock *l;
    th_proxy *px;
    const int64_t k = th_slack();
    dlock_client *c = proxied_holder(&px, &g, 0, k, name, sizeof(name), "force-renew", &l);
    const int hold = (int)(200 * k);
    th_proxy_delay_match(px, dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW].sha, hold);
    int64_t until = th_now_ms() + WD_LONG(k);   /* the next renewal (within half of it), held */
    while (th_proxy_delayed(px) == 0 && th_now_ms() < until)
        th_sleep_ms(1);
    assert_int_equal(th_proxy_delayed(px), 1);
    force_with_late_answer(px, c, l, &g, 3 * hold, 2);
}

/* ------------------------------------------------------- review fixes */

/* SCRIPT FLUSH while locks are held, twice: renewals reload the script each
 * time and nothing is lost. */
static void test_script_flush_keeps_renewing(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "flush"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    for (int i = 0; i < 2; i++) {
        th_sleep_ms(WD / 2);
        freeReplyObject(th_cmd(&srv, "SCRIPT FLUSH"));
        th_sleep_ms(WD);
        assert_true(th_int(&srv, "PTTL %s", name) > 0);
    }
    assert_int_equal(lost_calls(&g), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A release that fails (no answer) stops the renewal anyway, as Redisson's
 * does: the lock then ends with its lease instead of living forever. */
static void test_failed_release_stops_renewal(void **state)
{
    (void)state;
    th_proxy *px = th_proxy_start(srv.port);
    char url[128], name[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_client *c = client_with(url, NULL, 300);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "relfail"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_proxy_blackhole(px, 1);
    int rc = dlock_lock_release(l);
    assert_true(rc == DLOCK_ECMDTIMEOUT || rc == DLOCK_ECONN);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_proxy_blackhole(px, 0);
    th_proxy_cut(px);
    th_sleep_ms(WD + 500);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);   /* expired, not renewed */
    dlock_lock_free(l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* A lost callback that tries to wait is refused (it would stall the io
 * thread), and renewals of the other locks carry on. */
static dlock_lock *cb_lock;
static atomic_int cb_rc = -99;   /* written on the io thread */

static void wait_in_callback(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    (void)reason;
    (void)ud;
    atomic_store(&cb_rc, dlock_lock_try(cb_lock, 3000, 1000));
}

static void test_wait_in_callback_is_refused(void **state)
{
    (void)state;
    dlock_client *c = client_with(srv.url, NULL, 0);
    char a[128], b[128];
    dlock_lock *la, *lb;
    assert_int_equal(dlock_lock_get(c, th_name(a, sizeof(a), "cb-kept"), &la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(b, sizeof(b), "cb-lost"), &lb), DLOCK_OK);
    cb_lock = lb;
    dlock_lock_set_lost_callback(lb, wait_in_callback, NULL);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    /* Someone else now holds b: our next renewal reports b lost, and the
     * callback tries to wait for it. */
    freeReplyObject(th_cmd(&srv, "DEL %s", b));
    freeReplyObject(th_cmd(&srv, "HSET %s other:1 1", b));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 60000", b));
    int64_t until = th_now_ms() + 2 * WD;
    while (atomic_load(&cb_rc) == -99 && th_now_ms() < until)
        th_sleep_ms(10);
    assert_int_equal(atomic_load(&cb_rc), DLOCK_EINVAL);
    th_sleep_ms(2 * WD);
    assert_true(th_int(&srv, "PTTL %s", a) > 0);   /* still renewed */
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DEL %s", b));
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* Force release from one thread destroys a hold another thread of the same
 * client was renewing: that thread is told (at its next renewal), and the
 * forcing thread's own renewal simply stops. */
static void *acquire_hold(void *arg)
{
    dlock_lock *l = arg;
    return (void *)(intptr_t)dlock_lock_acquire(l, DLOCK_WATCHDOG);
}

static void test_force_release_reports_other_holder(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "forced"), &l), DLOCK_OK);
    pthread_t t;
    void *res;
    pthread_create(&t, NULL, acquire_hold, l);
    pthread_join(t, &res);
    assert_int_equal((int)(intptr_t)res, DLOCK_OK);
    int was = 0;
    assert_int_equal(dlock_lock_force_release(l, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    assert_int_equal(await_lost(&g, WD + 500), 1);
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* One key of a renewal batch replaced by a string: that hold is reported
 * lost, the others of the same batch keep being renewed. */
static void test_wrong_type_in_batch(void **state)
{
    (void)state;
    lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
    dlock_client *c = client_with(srv.url, &g, 0);
    char a[128], b[128];
    dlock_lock *la, *lb;
    assert_int_equal(dlock_lock_get(c, th_name(a, sizeof(a), "batch-ok"), &la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(b, sizeof(b), "batch-bad"), &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DEL %s", b));
    freeReplyObject(th_cmd(&srv, "SET %s somebody-else", b));
    assert_int_equal(await_lost(&g, WD + 500), 1);
    assert_string_equal(g.name, b);
    th_sleep_ms(2 * WD);
    assert_true(th_int(&srv, "PTTL %s", a) > 0);
    assert_int_equal(lost_calls(&g), 1);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    freeReplyObject(th_cmd(&srv, "DEL %s", b));
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_lock_never_expires),
        cmocka_unit_test(test_renewals_are_batched),
        cmocka_unit_test(test_killed_holder_frees_lock),
        cmocka_unit_test(test_paused_holder_reports_pause),
        cmocka_unit_test(test_deleted_key_is_reported_lost),
        cmocka_unit_test(test_restart_loses_lock),
        cmocka_unit_test(test_release_of_lost_hold_reports_it),
        cmocka_unit_test(test_unreachable_reports_lost_in_time),
        cmocka_unit_test(test_release_is_not_a_loss),
        cmocka_unit_test(test_force_release_beside_recheck),
        cmocka_unit_test(test_force_release_beside_renewal),
        cmocka_unit_test(test_script_flush_keeps_renewing),
        cmocka_unit_test(test_wrong_type_in_batch),
        cmocka_unit_test(test_failed_release_stops_renewal),
        cmocka_unit_test(test_wait_in_callback_is_refused),
        cmocka_unit_test(test_force_release_reports_other_holder),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
