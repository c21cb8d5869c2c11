/* Managed Redis (issue 23): a primary and its replicas whose roles are
 * swapped with REPLICAOF while a holder holds, a waiter waits and the
 * watchdog renews, the way a managed service fails over behind one address.
 *
 *   - one address that names another server after the swap (a DNS name; here
 *     the test proxy, switched from the old primary's port to the new one's):
 *     the hold is renewed on the new primary, the waiter gets the lock there,
 *     new requests go there;
 *   - one address that keeps naming the old primary (now a replica): holds
 *     are reported lost, never silently kept; a new acquisition ends with a
 *     clear error and writes nothing;
 *   - redis-replicated:// (a node list, the primary found with ROLE).
 *
 * With DLOCK_TEST_TLS=1 (CTest's test_managed_tls) every client talks TLS
 * (rediss://, rediss-replicated://, through the proxy too), replication and
 * REPLICAOF go to the TLS ports; the admin helpers stay on the plain ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "dlock/async.h"
#include "harness.h"
#include "proxy.h"

static int64_t t_demoted;   /* when swap_to had made the old primary a replica */

/* Waits until np has n replicas connected. */
static void await_replicas(th_redis *np, int n)
{
    char want[32];
    snprintf(want, sizeof(want), "connected_slaves:%d", n);
    for (int64_t until = th_now_ms() + 20000 * th_slack(); th_now_ms() < until;
         th_sleep_ms(20)) {
        redisReply *r = th_cmd(np, "INFO replication");
        int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want) != NULL;
        freeReplyObject(r);
        if (ok)
            return;
    }
    fail_msg("%d has not %d replicas", np->port, n);
}

/* Makes np the primary, the others its replicas, as an operator (or a managed
 * service) would: everything written so far reached every replica first.
 * Returns once np has its replicas back. */
static void swap_to(th_redis *np)
{
    /* WAIT counts this connection's writes: one first, after every write of
     * the clients (the replication stream is in order). */
    redisContext *ac = th_admin(th_rs.cur);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "INCR mg-barrier");
    assert_non_null(r);
    freeReplyObject(r);
    r = redisCommand(ac, "WAIT %d %d", TH_REPLICAS, (int)(5000 * th_slack()));
    assert_non_null(r);
    assert_int_equal(r->integer, TH_REPLICAS);
    freeReplyObject(r);
    redisFree(ac);
    assert_int_equal(th_replset_promote(&th_rs.set, np), 0);
    th_rs.cur = np;
    t_demoted = th_now_ms();
    await_replicas(np, TH_REPLICAS);
    /* The replicas follow np at its client port: its TLS one in TLS mode. */
    char want[32];
    snprintf(want, sizeof(want), "master_port:%d\r", th_client_port(np));
    for (int i = 0; i <= TH_REPLICAS; i++)
        if (th_rs_server(i) != np) {
            r = th_cmd(th_rs_server(i), "INFO replication");
            assert_non_null(r);
            assert_non_null(strstr(r->str, want));
            freeReplyObject(r);
        }
}

/* Clients (not replicas, not this admin connection) connected to np's TLS
 * port: in TLS mode the dlock clients must be there. */
static int tls_clients(th_redis *np)
{
    char laddr[48];
    snprintf(laddr, sizeof(laddr), "laddr=127.0.0.1:%d ", np->tls_port);
    redisReply *r = th_cmd(np, "CLIENT LIST");
    assert_non_null(r);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        n += strstr(line, laddr) && strstr(line, " flags=N ");
    freeReplyObject(r);
    return n;
}

struct waiter_arg {
    dlock_client *c;
    const char *name;
    int64_t wait_ms;
    int rc;
    int64_t done_at;
};

static void *waiter(void *arg)
{
    struct waiter_arg *w = arg;
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(w->c, w->name, &l), DLOCK_OK);
    w->rc = dlock_lock_try(l, w->wait_ms, 5000);
    w->done_at = th_now_ms();
    if (w->rc == DLOCK_OK)
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    return NULL;
}

static char url_buf[1024];

/* The URL of one address: port (a server's client port, th_client_port, or
 * the proxy's), rediss:// with the test certificates in TLS mode. */
static const char *url_of_port(int port)
{
    return th_url_port(th_rs.cur, port, url_buf, sizeof(url_buf));
}

/* A holder (client a, watchdog), a waiter for its lock (client b) and a
 * lock of b's nobody holds: the scene a swap of roles plays in. */
typedef struct scene {
    dlock_client *a, *b;
    char held[64], fresh[64];
    dlock_lock *lh, *lf;
    struct waiter_arg w;
    pthread_t t;
    int64_t wd;
} scene;

static void scene_start(scene *sc, dlock_client *a, dlock_client *b, int64_t wd)
{
    sc->a = a;
    sc->b = b;
    sc->wd = wd;
    th_name(sc->held, sizeof(sc->held), "mg-held");
    th_name(sc->fresh, sizeof(sc->fresh), "mg-fresh");
    assert_int_equal(dlock_lock_get(a, sc->held, &sc->lh), DLOCK_OK);
    assert_int_equal(dlock_lock_get(b, sc->fresh, &sc->lf), DLOCK_OK);
    atomic_store(&th_lost_reason, 0);
    dlock_lock_set_lost_callback(sc->lh, th_on_lost, NULL);
    assert_int_equal(dlock_lock_acquire(sc->lh, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(th_rs.cur, "EXISTS %s", sc->held), 1);
    sc->w = (struct waiter_arg){b, sc->held, 60000 * th_slack(), -99, 0};
    pthread_create(&sc->t, NULL, waiter, &sc->w);
    assert_true(th_await_lock_waiter(b, sc->held));
}

/* After the swap to np: the first acquisition lands on np (returns how long
 * after the old primary was demoted), the hold is renewed there past two
 * whole leases (untouched, it would have expired), and the waiter gets the
 * lock there once it is released. Closes the scene's clients. */
static int64_t scene_check(scene *sc, th_redis *np)
{
    int64_t slack = th_slack(), first_ok = -1;
    while (th_now_ms() - t_demoted < 10000 * slack) {
        if (dlock_lock_try(sc->lf, 0, 30000) == DLOCK_OK) {
            first_ok = th_now_ms();
            break;
        }
        th_sleep_ms(5);
    }
    assert_true(first_ok > 0);
    assert_int_equal(th_int(np, "EXISTS %s", sc->fresh), 1);
    if (np->tls) {
        int n = tls_clients(np);
        printf("# clients over TLS on the new primary: %d\n", n);
        assert_true(n > 0);
    }
    assert_int_equal(dlock_lock_release(sc->lf), DLOCK_OK);
    assert_int_equal(th_int(np, "EXISTS %s", sc->fresh), 0);
    th_sleep_ms(2 * sc->wd + 500);
    long long pttl = th_int(np, "PTTL %s", sc->held);
    if (pttl <= 0)
        th_client_log_dump(sc->a);
    assert_true(pttl > 0);
    assert_int_equal(atomic_load(&th_lost_reason), 0);
    int held_now = 0;
    assert_int_equal(dlock_lock_is_held(sc->lh, &held_now), DLOCK_OK);
    assert_int_equal(held_now, 1);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(sc->lh), DLOCK_OK);
    pthread_join(sc->t, NULL);
    if (sc->w.rc != DLOCK_OK)
        th_client_log_dump(sc->b);
    assert_int_equal(sc->w.rc, DLOCK_OK);
    printf("# release -> waiter acquired: %lld ms\n", (long long)(sc->w.done_at - t0));
    assert_true(sc->w.done_at - t0 < 5000 * slack);
    assert_int_equal(th_int(np, "EXISTS %s", sc->held), 0);
    dlock_lock_free(sc->lh);
    dlock_lock_free(sc->lf);
    dlock_client_close(sc->a);
    dlock_client_close(sc->b);
    return first_ok - t_demoted;
}

/* The address now names the new primary (the proxy, like a DNS name, sends
 * new connections there; those already open stay on the old server, now a
 * replica). The hold is renewed on the new primary past its lease, the
 * waiter gets the lock there when it is released, a new acquisition lands
 * there. */
static void test_name_follows_the_new_primary(void **state)
{
    (void)state;
    int64_t wd = 1500 * th_slack();
    th_proxy *px = th_proxy_start(th_client_port(th_rs.cur));
    assert_non_null(px);
    const char *url = url_of_port(th_proxy_port(px));
    scene sc;
    scene_start(&sc, th_client_url(url, wd), th_client_url(url, 0), wd);
    th_redis *np = th_rs_next();
    th_proxy_retarget(px, th_client_port(np));
    swap_to(np);
    int64_t ms = scene_check(&sc, np);
    printf("# old primary demoted -> first acquisition through the name: %lld ms\n",
           (long long)ms);
    th_proxy_stop(px);
}

/* The address keeps naming the old primary, a replica now: nothing can be
 * written there. The hold is reported lost (never kept silently), a new
 * acquisition ends with a clear error within the retry budget, and nothing
 * is written on the new primary. */
static void test_address_of_a_demoted_server(void **state)
{
    (void)state;
    int64_t slack = th_slack(), wd = 1500 * slack;
    th_redis *old = th_rs.cur, *np = th_rs_next();
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url_of_port(th_client_port(old))), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, wd), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 3, 100), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char held[64], fresh[64];
    th_name(held, sizeof(held), "mg-lost");
    th_name(fresh, sizeof(fresh), "mg-refused");
    dlock_lock *lh, *lf;
    assert_int_equal(dlock_lock_get(c, held, &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, fresh, &lf), DLOCK_OK);
    atomic_store(&th_lost_reason, 0);
    dlock_lock_set_lost_callback(lh, th_on_lost, NULL);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    swap_to(np);
    int64_t t0 = th_now_ms();
    for (int64_t until = t0 + wd + 3000 * slack;
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(10);
    assert_int_not_equal(atomic_load(&th_lost_reason), 0);
    printf("# swap -> hold reported lost: %lld ms (lease %lld)\n",
           (long long)(th_now_ms() - t0), (long long)wd);
    int rc = dlock_lock_try(lf, 0, 30000);
    printf("# acquire on the demoted server: %s: %s\n", dlock_errname(rc), dlock_last_error());
    assert_int_equal(rc, DLOCK_EREDIS);
    assert_non_null(strstr(dlock_last_error(), "READONLY"));
    assert_non_null(strstr(dlock_last_error(), "replica"));
    for (int i = 0; i <= TH_REPLICAS; i++)
        assert_int_equal(th_int(th_rs_server(i), "EXISTS %s", fresh), 0);
    dlock_lock_free(lh);
    dlock_lock_free(lf);
    dlock_client_close(c);
}

/* ------------------------------------------------------ redis-replicated:// */

static char rep_url[1024];

/* redis-replicated:// (rediss-replicated:// in TLS mode) naming the servers
 * i with (mask >> i) & 1. */
static const char *replicated_url(unsigned mask)
{
    th_redis *nodes[TH_REPLICAS + 1];
    int n = 0;
    for (int i = 0; i <= TH_REPLICAS; i++)
        if (mask >> i & 1)
            nodes[n++] = th_rs_server(i);
    return th_nodes_url(rep_url, sizeof(rep_url), "replicated", nodes, n, "");
}

/* A client on url (NULL with the status in *rc when it does not open). */
static dlock_client *open_replicated(const char *url, int64_t wd, int64_t scan_ms,
                                     int64_t connect_ms, int *rc)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    if (wd)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, wd), DLOCK_OK);
    assert_int_equal(dlock_config_set_scan_interval(cfg, scan_ms), DLOCK_OK);
    if (connect_ms)
        assert_int_equal(dlock_config_set_connect_timeout(cfg, connect_ms), DLOCK_OK);
    dlock_client *c = NULL;
    *rc = dlock_client_open(&c, cfg);
    dlock_config_free(cfg);
    return c;
}

/* The roles swapped under a redis-replicated:// client: the hold is renewed
 * on the new primary, the waiter gets the lock there, the first acquisition
 * lands there within a scan interval and a few round trips, and each node is
 * asked ROLE about once per interval. */
static void test_replicated_follows_the_swap(void **state)
{
    (void)state;
    int64_t wd = 1500 * th_slack(), scan = 1000;
    int rc;
    dlock_client *a = open_replicated(replicated_url(7), wd, scan, 0, &rc);
    assert_int_equal(rc, DLOCK_OK);
    dlock_client *b = open_replicated(replicated_url(7), 0, scan, 0, &rc);
    assert_int_equal(rc, DLOCK_OK);
    scene sc;
    scene_start(&sc, a, b, wd);

    /* ROLE calls per node over a few idle intervals: two clients. */
    long long before[TH_REPLICAS + 1];
    for (int i = 0; i <= TH_REPLICAS; i++)
        before[i] = th_calls(th_rs_server(i), "role");
    int64_t t0 = th_now_ms();
    th_sleep_ms(3 * scan);
    double intervals = (double)(th_now_ms() - t0) / (double)scan;
    for (int i = 0; i <= TH_REPLICAS; i++) {
        double per = (double)(th_calls(th_rs_server(i), "role") - before[i]) / 2.0 / intervals;
        printf("# node %d: %.2f ROLE per client per scan interval\n", i, per);
        assert_true(per <= 1.5);
    }

    th_redis *np = th_rs_next();
    swap_to(np);
    int64_t ms = scene_check(&sc, np);
    printf("# old primary demoted -> first acquisition on the new primary: %lld ms (scan %lld "
           "ms)\n",
           (long long)ms, (long long)scan);
    assert_true(ms <= scan + 500 * th_slack());
}

/* ------------------------------- a waiter's subscription after a demotion */

/* As swap_to, but the old primary is cut off from the new one: it becomes a
 * replica of an address nobody listens on (a managed failover that fences
 * the old node), so it refuses writes and no longer carries the new
 * primary's messages. Returns the old primary (rejoin it after). */
static th_redis *swap_cut_off(th_redis *np)
{
    th_redis *old = th_rs.cur;
    swap_to(np);
    redisReply *r = th_cmd(old, "REPLICAOF 127.0.0.1 %d", th_free_port());
    assert_non_null(r);
    freeReplyObject(r);
    t_demoted = th_now_ms();
    await_replicas(np, TH_REPLICAS - 1);
    return old;
}

static void rejoin(th_redis *old)
{
    redisReply *r = th_cmd(old, "REPLICAOF 127.0.0.1 %d", th_client_port(th_rs.cur));
    assert_non_null(r);
    freeReplyObject(r);
    await_replicas(th_rs.cur, TH_REPLICAS);
}

/* Holder a holds with a long lease, waiter b waits (its subscription on the
 * old primary; two watch periods + 20 s x slack), the roles swap with the old primary cut
 * off; a releases on the new primary; b must wake from the unlock message
 * published there, within one watch period (10 s on one address, the scan
 * interval on redis-replicated://) + 3 s x slack: far sooner than the
 * lease (120 s x slack) or its wait, its only other wake-ups. */
static void waiter_follows(dlock_client *a, dlock_client *b, th_proxy *px, int64_t watch,
                           int64_t before_swap_ms)
{
    int64_t slack = th_slack(), lease = 120000 * slack;
    char name[64];
    th_name(name, sizeof(name), "mg-sub");
    dlock_lock *lh;
    assert_int_equal(dlock_lock_get(a, name, &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lh, 0, lease), DLOCK_OK);
    struct waiter_arg w = {b, name, 2 * watch + 20000 * slack, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    assert_true(th_await_lock_waiter(b, name));
    th_sleep_ms(before_swap_ms);
    th_redis *np = th_rs_next();
    if (px)
        th_proxy_retarget(px, th_client_port(np));
    th_redis *old = swap_cut_off(np);
    th_sleep_ms(1000);   /* the waiter waits across the swap */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    pthread_join(t, NULL);
    if (w.rc != DLOCK_OK)
        th_client_log_dump(b);
    assert_int_equal(w.rc, DLOCK_OK);
    int64_t ms = w.done_at - t0;
    printf("# release on the new primary -> waiter acquired: %lld ms (lease %lld ms)\n",
           (long long)ms, (long long)lease);
    assert_true(ms < watch + 3000 * slack);
    assert_int_equal(th_int(np, "EXISTS %s", name), 0);   /* the waiter released it there */
    dlock_lock_free(lh);
    dlock_client_close(a);
    dlock_client_close(b);
    rejoin(old);
}

/* One address (the proxy, switched as a DNS name would be). At once: the
 * waiter's client first asks the address after the switch and finds a
 * primary that is not the subscriptions' server (run_id). After 11 s (one
 * watch tick): its asking connection stays on the old server, which says it
 * is a replica now (ROLE). */
static void test_name_moves_the_subscriptions(void **state)
{
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        th_proxy *px = th_proxy_start(th_client_port(th_rs.cur));
        assert_non_null(px);
        const char *url = url_of_port(th_proxy_port(px));
        waiter_follows(th_client_url(url, 0), th_client_url(url, 0), px, 10000, pass * 11000);
        th_proxy_stop(px);
    }
}

/* redis-replicated:// */
static void test_replicated_moves_the_subscriptions(void **state)
{
    (void)state;
    int rc;
    dlock_client *a = open_replicated(replicated_url(7), 0, 1000, 0, &rc);
    assert_int_equal(rc, DLOCK_OK);
    dlock_client *b = open_replicated(replicated_url(7), 0, 1000, 0, &rc);
    assert_int_equal(rc, DLOCK_OK);
    waiter_follows(a, b, NULL, 1000, 0);   /* the scan interval */
}

/* A user whose ACL refuses ROLE: the watch asks once per client, is refused,
 * says so in the log and stops asking; waiters still wake on the unlock
 * message. */
static void test_role_refused(void **state)
{
    (void)state;
    int64_t slack = th_slack();
    redisReply *r = th_cmd(th_rs.cur, "ACL SETUSER mg-norole on >pw ~* &* +@all -role");
    assert_non_null(r);
    freeReplyObject(r);
    r = th_cmd(th_rs.cur, "CONFIG RESETSTAT");
    freeReplyObject(r);
    char url[1024];
    const char *one = url_of_port(th_client_port(th_rs.cur)), *host = strstr(one, "://") + 3;
    snprintf(url, sizeof(url), "%.*smg-norole:pw@%s", (int)(host - one), one, host);
    dlock_client *a = th_client_url(url, 0), *b = th_client_url(url, 0);
    char name[64];
    th_name(name, sizeof(name), "mg-norole");
    dlock_lock *lh;
    assert_int_equal(dlock_lock_get(a, name, &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lh, 0, 120000 * slack), DLOCK_OK);
    struct waiter_arg w = {b, name, 60000 * slack, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    assert_true(th_await_lock_waiter(b, name));
    th_sleep_ms(21000);   /* two ticks of the watch (every 10 s) */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.done_at - t0 < 3000 * slack);
    r = th_cmd(th_rs.cur, "INFO commandstats");
    assert_non_null(r);
    const char *p = strstr(r->str, "cmdstat_role:");
    long long rejected = p && strstr(p, "rejected_calls=") ? atoll(strstr(p, "rejected_calls=") + 15)
                                                           : -1;
    freeReplyObject(r);
    printf("# ROLE refused: asked %lld times by the waiting client over 2 ticks\n", rejected);
    assert_int_equal(rejected, 1);
    dlock_lock_free(lh);
    dlock_client_close(a);
    dlock_client_close(b);
    r = th_cmd(th_rs.cur, "ACL DELUSER mg-norole");
    freeReplyObject(r);
}

struct async_done {
    _Atomic int done;
    int rc;
    char msg[512];
};

static void on_async_done(const dlock_async_result *res, void *ud)
{
    struct async_done *d = ud;
    d->rc = dlock_async_status(res);
    snprintf(d->msg, sizeof(d->msg), "%s", dlock_async_message(res));
    atomic_store(&d->done, 1);
}

/* No primary in the list, two primaries at once, a bad URL: each a clear
 * error, nothing written. */
static void test_replicated_bad_input(void **state)
{
    (void)state;
    int rc;
    unsigned replicas = 0;
    for (int i = 0; i <= TH_REPLICAS; i++)
        if (th_rs_server(i) != th_rs.cur)
            replicas |= 1u << i;
    int64_t t0 = th_now_ms();
    dlock_client *c = open_replicated(replicated_url(replicas), 0, 100, 500, &rc);
    assert_null(c);
    assert_int_equal(rc, DLOCK_ECONN);
    printf("# only replicas: %s (after %lld ms)\n", dlock_last_error(),
           (long long)(th_now_ms() - t0));
    assert_non_null(strstr(dlock_last_error(), "no node is a primary"));
    assert_non_null(strstr(dlock_last_error(), "slave"));
    assert_true(th_now_ms() - t0 >= 500);

    const char *bad[] = {"redis-replicated://", "redis-replicated://h:1#name",
                         "redis-replicated://h:1,,h:2", "redis-replicated://h:99999",
                         "redis-replicated://h:1?cacert=x"};
    dlock_config *cfg = dlock_config_new();
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dlock_config_set_url(cfg, bad[i]), DLOCK_EINVAL);
        printf("# %s: %s\n", bad[i], dlock_last_error());
    }
    assert_int_equal(dlock_config_set_scan_interval(cfg, 5), DLOCK_EINVAL);
    dlock_config_free(cfg);

    /* Two primaries: a client already open refuses to write, naming both;
     * its asynchronous calls and its renewals refuse too (the hold it had
     * is reported lost, its key not extended on either primary). */
    int64_t wd = 1500 * th_slack();
    c = open_replicated(replicated_url(7), wd, 100, 500, &rc);   /* async budget (500 + 200) x 4 */
    assert_int_equal(rc, DLOCK_OK);
    char held[64];
    dlock_lock *lh;
    assert_int_equal(dlock_lock_get(c, th_name(held, sizeof(held), "rp-held"), &lh), DLOCK_OK);
    atomic_store(&th_lost_reason, 0);
    dlock_lock_set_lost_callback(lh, th_on_lost, NULL);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    th_redis *other = th_rs_next();
    redisReply *r = th_cmd(other, "REPLICAOF NO ONE");
    freeReplyObject(r);
    int64_t t_split = th_now_ms();
    th_sleep_ms(300 * th_slack());   /* a scan or two */
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "rp-two"), &l), DLOCK_OK);
    for (int64_t until = t_split + wd + 5000 * th_slack();
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(10);
    printf("# two primaries -> hold reported lost: %lld ms (lease %lld)\n",
           (long long)(th_now_ms() - t_split), (long long)wd);
    assert_int_not_equal(atomic_load(&th_lost_reason), 0);
    while (th_now_ms() < t_split + wd + 50)   /* its lease, never extended, is over */
        th_sleep_ms(10);
    assert_int_equal(th_int(th_rs.cur, "EXISTS %s", held), 0);
    assert_int_equal(th_int(other, "EXISTS %s", held), 0);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *la;
    assert_int_equal(dlock_client_new_owner_id(c, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(c, name, owner, &la), DLOCK_OK);
    struct async_done ad = {0, -99, ""};
    int64_t t_async = th_now_ms();
    assert_int_equal(dlock_lock_acquire_async(la, NULL, on_async_done, &ad), DLOCK_OK);
    for (int64_t until = th_now_ms() + 30000 * th_slack();
         !atomic_load(&ad.done) && th_now_ms() < until;)
        th_sleep_ms(10);
    assert_true(atomic_load(&ad.done));
    printf("# two primaries, asynchronous acquire: %s after %lld ms: %s\n",
           dlock_errname(ad.rc), (long long)(th_now_ms() - t_async), ad.msg);
    assert_int_equal(ad.rc, DLOCK_ECONN);
    assert_non_null(strstr(ad.msg, "more than one node is a primary"));
    dlock_lock_free(la);
    dlock_lock_free(lh);
    rc = dlock_lock_try(l, 0, 30000);
    printf("# two primaries: %s\n", dlock_last_error());
    assert_int_equal(rc, DLOCK_ECONN);
    assert_non_null(strstr(dlock_last_error(), "more than one node is a primary"));
    char p1[32], p2[32];
    snprintf(p1, sizeof(p1), ":%d master", th_client_port(th_rs.cur));
    snprintf(p2, sizeof(p2), ":%d master", th_client_port(other));
    assert_non_null(strstr(dlock_last_error(), p1));
    assert_non_null(strstr(dlock_last_error(), p2));
    for (int i = 0; i <= TH_REPLICAS; i++)
        assert_int_equal(th_int(th_rs_server(i), "EXISTS %s", name), 0);
    /* One primary again: writes go on. */
    r = th_cmd(other, "REPLICAOF 127.0.0.1 %d", th_client_port(th_rs.cur));
    freeReplyObject(r);
    swap_to(th_rs.cur);
    assert_int_equal(dlock_lock_try(l, 2000 * th_slack(), 30000), DLOCK_OK);
    assert_int_equal(th_int(th_rs.cur, "EXISTS %s", name), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_follows_the_new_primary),
        cmocka_unit_test(test_address_of_a_demoted_server),
        cmocka_unit_test(test_replicated_follows_the_swap),
        cmocka_unit_test(test_replicated_bad_input),
        cmocka_unit_test(test_name_moves_the_subscriptions),
        cmocka_unit_test(test_replicated_moves_the_subscriptions),
        cmocka_unit_test(test_role_refused),
    };
    if (getenv("TH_ONLY"))   /* TH_ONLY='*pattern*': those tests only */
        cmocka_set_test_filter(getenv("TH_ONLY"));
    return cmocka_run_group_tests(tests, th_rs_setup, th_rs_teardown);
}
