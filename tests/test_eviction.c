/* The maxmemory-policy check at open: a policy that may evict held locks is
 * said once through the log callback and reported by
 * dlock_client_eviction_policy; a safe one, or one that cannot be read (an
 * ACL without +info), lets the open go on quietly. */
#include <pthread.h>
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
#include "sync/sync.h"

typedef struct sink {
    pthread_mutex_t mu;
    int warnings, about_policy;
    char last[512];
} sink;

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    sink *s = ud;
    pthread_mutex_lock(&s->mu);
    if (level <= DLOCK_LOG_WARN) {
        s->warnings++;
        if (strstr(msg, "maxmemory-policy")) {
            s->about_policy++;
            snprintf(s->last, sizeof(s->last), "%s", msg);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static dlock_client *open_logged(const char *url, sink *s)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, on_log, s, DLOCK_LOG_DEBUG), DLOCK_OK);
    dlock_client *c;
    int rc = dlock_client_open(&c, cfg);
    if (rc != DLOCK_OK)
        fail_msg("open %s: %s", url, dlock_last_error());
    dlock_config_free(cfg);
    return c;
}

/* Opens a client of r (with a lock taken and released, so that every
 * connection kind has run) and checks what it reports. */
static void check(th_redis *r, const char *policy, int risky)
{
    sink s = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    dlock_client *c = open_logged(r->url, &s);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "evict:x", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    char got[32];
    int got_risky = -1;
    assert_int_equal(dlock_client_eviction_policy(c, got, sizeof(got), &got_risky), DLOCK_OK);
    assert_string_equal(got, policy);
    assert_int_equal(got_risky, risky);
    dlock_client_close(c);
    assert_int_equal(s.about_policy, risky ? 1 : 0);
    if (risky) {
        char port[16];
        snprintf(port, sizeof(port), ":%d", th_client_port(r));
        assert_non_null(strstr(s.last, policy));
        assert_non_null(strstr(s.last, port));
        print_message("    warning: %s\n", s.last);
    }
}

static void test_evicting_policies_warn_once(void **state)
{
    (void)state;
    static const char *const risky[] = {"allkeys-lru", "allkeys-lfu", "allkeys-random",
                                        "volatile-lru", "volatile-lfu", "volatile-random",
                                        "volatile-ttl"};
    th_redis r;
    assert_int_equal(th_redis_start(&r, NULL), 0);
    check(&r, "noeviction", 0);
    for (size_t i = 0; i < sizeof(risky) / sizeof(risky[0]); i++) {
        freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory-policy %s", risky[i]));
        check(&r, risky[i], 1);
    }
    th_redis_destroy(&r);
}

/* A user that may not run INFO: the policy is unknown, the open succeeds,
 * nothing warns. */
static void test_unreadable_policy_is_not_fatal(void **state)
{
    (void)state;
    th_redis r;
    assert_int_equal(th_redis_start(&r, "--maxmemory-policy", "allkeys-lru", NULL), 0);
    freeReplyObject(th_cmd(&r, "ACL SETUSER noinfo on >pw +@all -info ~* &*"));
    char url[600], base[600];
    th_url_port(&r, th_client_port(&r), base, sizeof(base));
    const char *rest = strstr(base, "://") + 3;
    const char *at = strchr(rest, '@');
    snprintf(url, sizeof(url), "%.*snoinfo:pw@%s", (int)(rest - base), base, at ? at + 1 : rest);
    sink s = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    dlock_client *c = open_logged(url, &s);
    char got[32] = "x";
    int risky = -1;
    assert_int_equal(dlock_client_eviction_policy(c, got, sizeof(got), &risky), DLOCK_OK);
    assert_string_equal(got, "");
    assert_int_equal(risky, 0);
    assert_int_equal(s.about_policy, 0);
    assert_int_equal(dlock_client_ping(c), DLOCK_OK);
    dlock_client_close(c);
    th_redis_destroy(&r);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    th_redis r;
    assert_int_equal(th_redis_start(&r, "--maxmemory-policy", "volatile-ttl", NULL), 0);
    dlock_client *c = th_client(&r, 0);
    char small[4];
    assert_int_equal(dlock_client_eviction_policy(c, small, sizeof(small), NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "need 13"));
    assert_int_equal(dlock_client_eviction_policy(NULL, small, sizeof(small), NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_eviction_policy(c, NULL, 0, NULL), DLOCK_EINVAL);
    char ok[13];
    assert_int_equal(dlock_client_eviction_policy(c, ok, sizeof(ok), NULL), DLOCK_OK);
    assert_string_equal(ok, "volatile-ttl");
    dlock_client_close(c);
    th_redis_destroy(&r);
}

/* ------------------------------------------------ the cause of a loss */

typedef struct lost_seen {
    pthread_mutex_t mu;
    int calls;
    dlock_lost_reason reason;
    dlock_lost_cause cause;
    char words[48];
    int64_t at;
    int form;                /* the callback's form: 0 dlock_lost_fn, 1 dlock_lost_cause_fn */
    dlock_lost_cause tls;    /* form 1: dlock_last_lost_cause() in the callback (kept) */
} lost_seen;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    lost_seen *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->reason = reason;
    g->cause = dlock_last_lost_cause();
    snprintf(g->words, sizeof(g->words), "%s", dlock_lost_cause_str(g->cause));
    g->at = th_now_ms();
    pthread_mutex_unlock(&g->mu);
}

/* The second form: the cause is an argument. */
static void on_lost_cause(const char *name, const char *owner, dlock_lost_reason reason,
                          dlock_lost_cause cause, void *ud)
{
    lost_seen *g = ud;
    on_lost(name, owner, reason, ud);   /* the thread-local, as the first form reads it */
    pthread_mutex_lock(&g->mu);
    g->tls = g->cause;
    g->cause = cause;
    snprintf(g->words, sizeof(g->words), "%s", dlock_lost_cause_str(cause));
    pthread_mutex_unlock(&g->mu);
}

/* Until tracking is on and the hold tracked: the renewal connection sent
 * its first sample of the node's counters (INFO) before CLIENT TRACKING was
 * answered, so that sample is in by then. */
static void await_sampled(dlock_client *c)
{
    int64_t until = th_now_ms() + 2000 * th_slack();
    while (th_now_ms() < until) {
        if (dlock__watchdog_tracking(c->wd) == 2)
            return;
        th_sleep_ms(1);
    }
    fail_msg("tracking not on after 2 s");
}

/* A client whose lost callback records into g, holding `name` with the
 * watchdog (6 s x the slack), its node's counters sampled. g->form 1: the
 * lock handle's callback in the cause form (the client's in the first form
 * records nothing then: the handle's takes precedence). */
static dlock_client *holding(const th_redis *r, lost_seen *g, const char *name, dlock_lock **l)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, r->url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 6000 * th_slack()), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 1, 100), DLOCK_OK);
    static lost_seen unused = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, "", 0, 0, 0};
    assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, g->form ? &unused : g),
                     DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    assert_int_equal(dlock_lock_get(c, name, l), DLOCK_OK);
    if (g->form)
        dlock_lock_set_lost_cause_callback(*l, on_lost_cause, g);
    assert_int_equal(dlock_lock_acquire(*l, DLOCK_WATCHDOG), DLOCK_OK);
    await_sampled(c);
    return c;
}

/* Waits until `until` (ms) for g's first loss. */
static void await_loss(lost_seen *g, int64_t until)
{
    while (th_now_ms() < until) {
        pthread_mutex_lock(&g->mu);
        int n = g->calls;
        pthread_mutex_unlock(&g->mu);
        if (n)
            return;
        th_sleep_ms(1);
    }
}

/* A held lock evicted (allkeys-lru, maxmemory cut to 1 byte): the holder's
 * lost callback says "evicted", within milliseconds of the eviction (client
 * tracking hears it, a renewal confirms, one INFO tells why). */
static void test_evicted_lock_says_evicted(void **state)
{
    (void)state;
    th_redis r;
    assert_int_equal(th_redis_start(&r, "--maxmemory-policy", "allkeys-lru", NULL), 0);
    lost_seen g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, "", 0, 0, 0};
    dlock_lock *l;
    dlock_client *c = holding(&r, &g, "evict:held", &l);
    assert_int_equal(dlock_last_lost_cause(), DLOCK_CAUSE_UNKNOWN);   /* outside a callback */
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory 1"));
    freeReplyObject(th_cmd(&r, "SET evict:filler x"));   /* evicts, if the SET did not */
    int64_t t1 = th_now_ms();
    assert_int_equal(th_int(&r, "EXISTS evict:held"), 0);
    await_loss(&g, t1 + 1000 * th_slack());
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory 0"));
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    assert_int_equal(g.cause, DLOCK_CAUSE_EVICTED);
    assert_string_equal(g.words, "evicted");
    int64_t took = g.at - t0;
    pthread_mutex_unlock(&g.mu);
    print_message("    callback said \"evicted\" %lld ms after the eviction began (%lld ms "
                  "for the eviction commands)\n", (long long)took, (long long)(t1 - t0));
    if (took > 50 * th_slack())
        fail_msg("the callback came %lld ms after the eviction (bound %lld)", (long long)took,
                 (long long)(50 * th_slack()));
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_redis_destroy(&r);
}

/* The server restarts without persistence: the lock is gone with its data,
 * and the node's run_id changed: "failover", the argument of the handle's
 * callback in the cause form (and the thread-local during it, as before). */
static void test_restart_says_failover(void **state)
{
    (void)state;
    th_redis r;
    assert_int_equal(th_redis_start(&r, NULL), 0);
    lost_seen g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, "", 0, 1, 0};
    dlock_lock *l;
    dlock_client *c = holding(&r, &g, "restart:held", &l);
    assert_int_equal(th_redis_restart(&r), 0);
    await_loss(&g, th_now_ms() + 6000 * th_slack());
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.reason, DLOCK_LOST_GONE);
    assert_int_equal(g.cause, DLOCK_CAUSE_FAILOVER);
    assert_int_equal(g.tls, DLOCK_CAUSE_FAILOVER);
    assert_string_equal(g.words, "failover");
    pthread_mutex_unlock(&g.mu);
    dlock_lock_free(l);
    dlock_client_close(c);
    th_redis_destroy(&r);
}

/* dlock_client_doctor's findings, gathered. */
typedef struct findings {
    int n, eviction, unsafe, clock;
    char node[64], text[1024];
} findings;

static void on_finding(dlock_doctor_level level, const char *node, const char *check,
                       const char *finding, const char *fix, void *ud)
{
    findings *f = ud;
    f->n++;
    if (level == DLOCK_DOCTOR_NOTE && strcmp(check, "clock") == 0 && strstr(finding, "offset"))
        f->clock++;
    if (level == DLOCK_DOCTOR_UNSAFE)
        f->unsafe++;
    if (strcmp(check, "eviction") == 0) {
        f->eviction++;
        snprintf(f->node, sizeof(f->node), "%s", node);
        snprintf(f->text, sizeof(f->text), "%s | %s", finding, fix ? fix : "");
    }
    print_message("    %d %s %s: %s\n", (int)level, node, check, finding);
}

/* The doctor names an evicting policy as unsafe, with its fix, and says
 * nothing of a server with noeviction and an append-only file. */
static void test_doctor(void **state)
{
    (void)state;
    th_redis r;
    assert_int_equal(th_redis_start(&r, "--appendonly", "yes", NULL), 0);
    dlock_client *c = th_client(&r, 0);
    findings f = {0};
    assert_int_equal(dlock_client_doctor(c, "doc:x", on_finding, &f), DLOCK_DOCTOR_NOTE);
    assert_int_equal(f.eviction, 0);
    assert_int_equal(f.unsafe, 0);
    assert_int_equal(f.clock, 1);   /* the node's clock offset, with the round trip */
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory 64mb"));
    freeReplyObject(th_cmd(&r, "CONFIG SET maxmemory-policy allkeys-lfu"));
    memset(&f, 0, sizeof(f));
    assert_int_equal(dlock_client_doctor(c, NULL, on_finding, &f), DLOCK_DOCTOR_UNSAFE);
    assert_int_equal(f.eviction, 1);
    assert_non_null(strstr(f.text, "allkeys-lfu"));
    assert_non_null(strstr(f.text, "noeviction"));
    char port[16];
    snprintf(port, sizeof(port), ":%d", th_client_port(&r));
    assert_non_null(strstr(f.node, port));
    /* Bad input: nothing asked. */
    assert_int_equal(dlock_client_doctor(NULL, NULL, on_finding, &f), DLOCK_EINVAL);
    assert_int_equal(dlock_client_doctor(c, NULL, NULL, &f), DLOCK_EINVAL);
    assert_int_equal(dlock_client_doctor(c, "", on_finding, &f), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "empty"));
    dlock_client_close(c);
    th_redis_destroy(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evicting_policies_warn_once),
        cmocka_unit_test(test_unreadable_policy_is_not_fatal),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_doctor),
        cmocka_unit_test(test_evicted_lock_says_evicted),
        cmocka_unit_test(test_restart_says_failover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
