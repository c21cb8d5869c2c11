/* Lock-delay (issue 25): a reentrant lock that ends without a release stays
 * closed to other owners for the delay after its lease; a lock released
 * normally is free at once; the marker beside the lock follows the
 * watchdog's renewals; Redisson's holds (which know no marker) are not
 * delayed; bad settings are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

#define DELAY 600   /* ms, times the slack */

static dlock_client *delayed_client(int64_t delay_ms, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    if (watchdog_ms)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, watchdog_ms), DLOCK_OK);
    assert_int_equal(dlock_config_set_lock_delay(cfg, delay_ms), DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

static void marker_of(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "dlock_lock_delay:{%s}", name);
}

/* Two clients with the delay (and watchdog timeout, 0: the default), each
 * with a handle on one fresh name; *marker is its marker's key. */
typedef struct pair {
    dlock_client *a, *b;
    dlock_lock *la, *lb;
    char name[96], marker[128];
} pair;

static void pair_open(pair *p, const char *prefix, int64_t delay_ms, int64_t watchdog_ms)
{
    p->a = delayed_client(delay_ms, watchdog_ms);
    p->b = delayed_client(delay_ms, watchdog_ms);
    th_name(p->name, sizeof(p->name), prefix);
    marker_of(p->name, p->marker, sizeof(p->marker));
    assert_int_equal(dlock_lock_get(p->a, p->name, &p->la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(p->b, p->name, &p->lb), DLOCK_OK);
}

static void pair_close(pair *p)
{
    dlock_lock_free(p->la);
    dlock_lock_free(p->lb);
    dlock_client_close(p->a);
    dlock_client_close(p->b);
}

/* A holder whose lease runs out unreleased (it stopped): another owner is
 * refused until lease + delay, with a message that says why; a waiter
 * sleeps through the delay and gets the lock once it ends. */
static void test_unreleased_lock_is_delayed(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), delay = DELAY * slack, lease = 300 * slack;
    pair p;
    pair_open(&p, "ld", delay, 0);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *name = p.name, *marker = p.marker;
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(la, 0, lease), DLOCK_OK);
    long long pttl = th_int(&srv, "PTTL %s", marker);
    assert_true(pttl > delay && pttl <= lease + delay);
    /* a's holder "dies": no release. Past its lease the lock is free... */
    while (th_int(&srv, "EXISTS %s", name) == 1)
        th_sleep_ms(5);
    /* ...but b is refused while the delay lasts. */
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "lock-delay"));
    int64_t refused_at = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 5000 * slack, 10000), DLOCK_OK);
    int64_t got = th_now_ms();
    print_message("    lease %lld ms, delay %lld ms: refused %lld ms after the acquisition, "
                  "acquired after %lld ms\n", (long long)lease, (long long)delay,
                  (long long)(refused_at - t0), (long long)(got - t0));
    /* Not before the lease + the delay counted from a's acquisition (which
     * Redis began no earlier than t0). */
    assert_true(got - t0 >= lease + delay - 5);
    assert_true(got - t0 < lease + delay + 2000 * slack);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);   /* released: no delay left */
    pair_close(&p);
}

/* Released normally (after reentries too): free at once for the next owner,
 * the marker gone. */
static void test_released_lock_is_free_at_once(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "ld-rel", 60000, 0);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *marker = p.marker;
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);   /* reentry */
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);   /* one hold left */
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pair_close(&p);
}

/* A watchdog hold: the marker is renewed with the lock (it outlives each
 * renewal by the delay); the lock forced open (an involuntary loss for its
 * holder) is refused to others until the marker ends, but not to a holder
 * without the setting... which is a Redisson-like raw client: the marker is
 * dlock's own. */
static void test_watchdog_renews_marker(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 900 * slack, delay = 2000 * slack;
    pair p;
    pair_open(&p, "ld-wd", delay, wd);
    dlock_lock *la = p.la, *lb = p.lb;
    const char *name = p.name, *marker = p.marker;
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(2 * wd);   /* past the first lease: renewed at least four times */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 1);
    long long pttl = th_int(&srv, "PTTL %s", marker);
    if (pttl <= delay)
        fail_msg("marker PTTL %lld after renewals, not above the delay %lld", pttl,
                 (long long)delay);
    /* Forced open by an operator: a's hold ends without its release. */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "lock-delay"));
    /* A Redisson client knows no marker: it takes the lock at once. */
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:1 1", name), 1);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    pair_close(&p);
}

/* A Redisson holder's release (DEL + the unlock message) wakes a dlock waiter
 * with a lock-delay at once: Redisson writes no marker, so nothing delays. */
static void test_redisson_holder_not_delayed(void **state)
{
    (void)state;
    dlock_client *b = delayed_client(60000, 0);
    char name[96], ch[160];
    th_name(name, sizeof(name), "ld-rs");
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    assert_int_equal(th_int(&srv, "HSET %s redisson-uuid:1 1", name), 1);
    assert_int_equal(th_int(&srv, "PEXPIRE %s 30000", name), 1);
    dlock_lock *lb;
    assert_int_equal(dlock_lock_get(b, name, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_ETIMEDOUT);
    assert_null(strstr(dlock_last_error(), "lock-delay"));   /* held, not delayed */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    th_publish(&srv, ch, "0");
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    dlock_lock_free(lb);
    dlock_client_close(b);
}

/* The owner that lost its own hold may take it again (the delay keeps out
 * the others); a handle's setting overrides the client's. */
static void test_same_owner_and_per_handle(void **state)
{
    (void)state;
    char name[96], marker[128];
    th_name(name, sizeof(name), "ld-own");
    marker_of(name, marker, sizeof(marker));
    dlock_lock *l, *other;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);   /* the client's: off */
    assert_int_equal(dlock_lock_get(cli, name, &other), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(l, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 1);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* lost */
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);   /* the same owner */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    /* The other handle has no delay of its own and sends no marker. */
    assert_int_equal(dlock_lock_try(other, 0, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", marker), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    /* Set after an acquisition: refused, the setting unchanged. */
    assert_int_equal(dlock_lock_set_lock_delay(l, 1000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "before the handle's first acquisition"));
    dlock_lock_free(l);
    dlock_lock_free(other);
}

static void test_bad_settings(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_lock_delay(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(cfg, 86400001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(NULL, 10), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_lock_delay(cfg, 86400000), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *l, *f;
    assert_int_equal(dlock_lock_get(cli, "ld:bad", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(l, -5), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_set_lock_delay(NULL, 5), DLOCK_EINVAL);
    assert_int_equal(dlock_fair_lock_get(cli, "ld:fair", &f), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(f, 5), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "reentrant locks only"));
    /* A marker key of another type: refused, nothing written. */
    assert_int_equal(dlock_lock_set_lock_delay(l, 1000), DLOCK_OK);
    assert_int_equal(th_int(&srv, "RPUSH dlock_lock_delay:{ld:bad} x"), 1);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS ld:bad"), 0);
    assert_int_equal(th_int(&srv, "DEL dlock_lock_delay:{ld:bad}"), 1);
    dlock_lock_free(l);
    dlock_lock_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreleased_lock_is_delayed),
        cmocka_unit_test(test_released_lock_is_free_at_once),
        cmocka_unit_test(test_watchdog_renews_marker),
        cmocka_unit_test(test_redisson_holder_not_delayed),
        cmocka_unit_test(test_same_owner_and_per_handle),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
