/* Harness: dlock clients on test servers, and the group fixture most test
 * programs share (fixture.h). */
#include "harness_int.h"
#include "fixture.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "sync/sync.h"

/* The last log lines of the harness's clients (info and above), for a
 * failing test to show what the library saw (th_client_log_dump). */
#define LOG_LINES 48
static char log_ring[LOG_LINES][240];
static unsigned log_next;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void ring_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&log_mu);
    snprintf(log_ring[log_next++ % LOG_LINES], sizeof(log_ring[0]), "%lld %d %s",
             (long long)th_now_ms(), (int)level, msg);
    pthread_mutex_unlock(&log_mu);
}

void th_client_log_dump(dlock_client *c)
{
    dlock_stats s;
    if (c && dlock_client_stats(c, &s, sizeof(s)) == DLOCK_OK)
        fprintf(stderr, "  client: %llu connects, %llu reconnects, %llu waits, %llu wake-ups\n",
                (unsigned long long)s.connects, (unsigned long long)s.reconnects,
                (unsigned long long)s.waits, (unsigned long long)s.wakeups);
    pthread_mutex_lock(&log_mu);
    unsigned from = log_next > LOG_LINES ? log_next - LOG_LINES : 0;
    fprintf(stderr, "  the harness's clients logged (ms, level, message), now %lld:\n",
            (long long)th_now_ms());
    for (unsigned i = from; i < log_next; i++)
        fprintf(stderr, "    %s\n", log_ring[i % LOG_LINES]);
    pthread_mutex_unlock(&log_mu);
}

dlock_client *th_client_url(const char *url, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_non_null(cfg);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, ring_log, NULL, DLOCK_LOG_INFO),
                     DLOCK_OK);
    if (watchdog_ms)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, watchdog_ms), DLOCK_OK);
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, cfg);
    if (rc != DLOCK_OK)
        fprintf(stderr, "dlock_client_open: %s\n", dlock_last_error());
    assert_int_equal(rc, DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

dlock_client *th_client(const th_redis *r, int64_t watchdog_ms)
{
    return th_client_url(r->url, watchdog_ms);
}

int th_await_lock_waiter(dlock_client *c, const char *name)
{
    char ch[300];
    int len = snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    for (int64_t until = th_now_ms() + 5000 * th_slack(); th_now_ms() < until; th_sleep_ms(5))
        if (dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) > 0)
            return 1;
    return dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) > 0;
}

/* ------------------------------------------------------------- fixture */

th_redis srv;
dlock_client *cli;

int th_setup_server(void **state)
{
    (void)state;
    cli = NULL;
    return th_redis_start(&srv, NULL);
}

int th_setup(void **state)
{
    if (th_setup_server(state) != 0)
        return -1;
    cli = th_client(&srv, 0);
    return 0;
}

int th_teardown(void **state)
{
    (void)state;
    dlock_client_close(cli);
    cli = NULL;
    th_redis_destroy(&srv);
    return 0;
}

_Atomic int th_lost_reason;
_Atomic int th_lost_cause;

void th_on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    (void)ud;
    atomic_store(&th_lost_cause, (int)dlock_last_lost_cause());
    atomic_store(&th_lost_reason, (int)reason);
}
