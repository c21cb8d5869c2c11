/* Harness: dlock clients on test servers, and the group fixture most test
 * programs share (fixture.h). */
#include "harness_int.h"
#include "fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "sync/sync.h"

dlock_client *th_client_url(const char *url, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_non_null(cfg);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
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
