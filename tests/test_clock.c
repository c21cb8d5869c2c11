/* The server clock check (issue 36 part 5, dlock_config_set_clock_jump):
 *
 *   - the comparison itself (dlock__clock_jump_us): steady clocks, round
 *     trips and drift within the allowance are no jump; a step beyond it,
 *     forward or backward, is, by about its size;
 *   - on a real server behind a proxy (tests/proxy.c) that moves the TIME
 *     answers by a shift the test sets: no false alarm over several
 *     watchdog periods, nor for a backward step; a forward step, whose
 *     effect the test makes on the server (the held keys' TTLs cut by it),
 *     is reported to every holder on the node, cause "server clock jumped",
 *     before a contender spinning on the lock can take it, and the node is
 *     quarantined for one lease: the contender, another client, is refused
 *     after the keys are gone, then gets the lock when the lease has passed.
 *
 * The same forward step on a cluster: the proxy in front of one primary,
 * which announces the proxy's port as its own (cluster-announce-port). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdatomic.h>

#include "harness.h"
#include "io/clock.h"
#include "proxy.h"
#include "sync/sync.h"

/* ------------------------------------------------------------ the rule */

static wd_clock at(int64_t server_ms, int64_t sent_ms, int64_t got_ms)
{
    return (wd_clock){1, server_ms * 1000, sent_ms * 1000, got_ms * 1000};
}

static void test_jump_rule(void **state)
{
    (void)state;
    /* The server's clock is 1e9 ms ahead of the monotonic one. */
    const int64_t off = 1000000000;
    wd_clock a = at(off + 1000, 1000, 1002);
    /* Steady, sampled 10 s apart with 2 ms round trips. */
    wd_clock b = at(off + 11001, 11000, 11002);
    assert_int_equal(dlock__clock_jump_us(&a, &b, 250), 0);
    /* A long round trip widens the window: the server read at its end. */
    b = at(off + 11400, 11000, 11400);
    assert_int_equal(dlock__clock_jump_us(&a, &b, 250), 0);
    /* Drift within 1% of 10 s plus 250 ms. */
    b = at(off + 11001 + 340, 11000, 11002);
    assert_int_equal(dlock__clock_jump_us(&a, &b, 250), 0);
    b = at(off + 11001 - 340, 11000, 11002);
    assert_int_equal(dlock__clock_jump_us(&a, &b, 250), 0);
    /* A step forward of 2 s: about 2 s beyond the window's end. */
    b = at(off + 13001, 11000, 11002);
    int64_t j = dlock__clock_jump_us(&a, &b, 250);
    assert_true(j >= 1997000 && j <= 2000000);
    /* Backward by 2 s. */
    b = at(off + 9001, 11000, 11002);
    j = dlock__clock_jump_us(&a, &b, 250);
    assert_true(j <= -1996000 && j >= -2000000);
    /* Just beyond the allowance (250 ms + 1% of the 10.002 s at most). */
    b = at(off + 11002 + 352, 11000, 11002);
    assert_true(dlock__clock_jump_us(&a, &b, 250) > 0);
    b = at(off + 11002 + 348, 11000, 11002);
    assert_int_equal(dlock__clock_jump_us(&a, &b, 250), 0);
    /* A smaller allowance sees a smaller step. */
    b = at(off + 11002 + 200, 11000, 11002);
    assert_true(dlock__clock_jump_us(&a, &b, 50) > 0);
    /* Without a sample before, nothing to compare with. */
    wd_clock none = {0, 0, 0, 0};
    assert_int_equal(dlock__clock_jump_us(&none, &b, 250), 0);
}

static void test_config(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_clock_jump(cfg, 100), DLOCK_OK);
    assert_int_equal(dlock_config_set_clock_jump(cfg, 0), DLOCK_OK);
    assert_int_equal(dlock_config_set_clock_jump(cfg, DLOCK_CLOCK_JUMP_OFF), DLOCK_OK);
    assert_int_equal(dlock_config_set_clock_jump(cfg, -2), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "clock jump allowance"));
    assert_int_equal(dlock_config_set_clock_jump(cfg, 86400001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_clock_jump(NULL, 100), DLOCK_EINVAL);
    dlock_config_free(cfg);
    assert_string_equal(dlock_lost_cause_str(DLOCK_CAUSE_CLOCK_JUMP), "server clock jumped");
}

/* ------------------------------------------------ through the proxy */

static th_redis srv;

static int setup(void **state)
{
    (void)state;
    return th_redis_start(&srv, "--save", "", NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_redis_destroy(&srv);
    return 0;
}

#define ALLOW_MS 100

static dlock_client *open_url(const char *url, int64_t wd)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, wd), DLOCK_OK);
    assert_int_equal(dlock_config_set_clock_jump(cfg, ALLOW_MS), DLOCK_OK);
    /* No client tracking: the test's cut of the TTLs would be heard as an
     * invalidation and checked at once; a real step touches no key, and is
     * seen by the next renewal pass. */
    assert_int_equal(dlock_config_set_revocation(cfg, 0), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

static dlock_client *through(th_proxy *px, int64_t wd)
{
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    return open_url(url, wd);
}

/* What the holder's lost callbacks saw. */
static atomic_int lost_n, lost_jump, lost_other;
static atomic_int contender_won;        /* the contender took the lock */
static atomic_int won_before_told;      /* ... while a holder had not been told */
static _Atomic int64_t told_at;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    (void)ud;
    if (reason == DLOCK_LOST_GONE && dlock_last_lost_cause() == DLOCK_CAUSE_CLOCK_JUMP)
        atomic_fetch_add(&lost_jump, 1);
    else
        atomic_fetch_add(&lost_other, 1);
    if (atomic_fetch_add(&lost_n, 1) == 0)
        atomic_store(&told_at, th_now_ms());
}

static void reset_seen(void)
{
    atomic_store(&lost_n, 0);
    atomic_store(&lost_jump, 0);
    atomic_store(&lost_other, 0);
    atomic_store(&contender_won, 0);
    atomic_store(&won_before_told, 0);
    atomic_store(&told_at, 0);
}

/* Cuts the TTL of `name` on its server by ms, as a clock stepping forward
 * by ms would (0 left: gone). */
static void step_ttl(th_redis *at, const char *name, int64_t ms)
{
    long long left = th_int(at, "PTTL %s", name);
    assert_true(left > 0);
    redisReply *r = th_cmd(at, "PEXPIRE %s %lld", name, left - ms > 0 ? left - ms : 0);
    assert_non_null(r);
    freeReplyObject(r);
}

/* Holds taken through the proxy live on through several watchdog periods
 * with steady TIME answers (no false alarm), and through a backward step
 * (keys then live longer, not shorter). */
static void test_no_false_alarm(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 1500 * slack;
    th_proxy *px = th_proxy_start(srv.port);
    assert_non_null(px);
    dlock_client *c = through(px, wd);
    reset_seen();
    char n[2][64];
    dlock_lock *l[2];
    for (int i = 0; i < 2; i++) {
        th_name(n[i], sizeof(n[i]), "clk-steady");
        assert_int_equal(dlock_lock_get(c, n[i], &l[i]), DLOCK_OK);
        dlock_lock_set_lost_callback(l[i], on_lost, NULL);
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    const int times0 = th_proxy_times(px);
    th_sleep_ms(6 * wd / 3);   /* six renewal passes */
    const int times = th_proxy_times(px) - times0;
    printf("# steady: %d TIME answers over 6 periods of %lld ms, %d holds lost\n", times,
           (long long)(wd / 3), atomic_load(&lost_n));
    assert_true(times >= 3);
    assert_int_equal(atomic_load(&lost_n), 0);

    th_proxy_shift_time(px, -(wd / 2) * 1000);
    const int times1 = th_proxy_times(px);
    th_sleep_ms(4 * wd / 3);
    assert_true(th_proxy_times(px) - times1 >= 2);
    assert_int_equal(atomic_load(&lost_n), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(th_int(&srv, "EXISTS %s", n[i]), 1);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    dlock_client_close(c);
    th_proxy_stop(px);
}

typedef struct contender {
    dlock_lock *l;
    atomic_int stop;
    int64_t won_at;
    int refused_recorded;   /* refused by the quarantine recorded on the server */
    int released;           /* the release of what it won */
    atomic_int keys_gone;   /* set by the test once it deleted the holds' keys */
} contender;

static void *contend(void *arg)
{
    contender *k = arg;
    while (!atomic_load(&k->stop)) {
        int rc = dlock_lock_try(k->l, 0, 60000);
        if (rc == DLOCK_OK) {
            k->won_at = th_now_ms();
            if (atomic_load(&lost_n) == 0)
                atomic_store(&won_before_told, 1);
            atomic_store(&contender_won, 1);
            k->released = dlock_lock_release(k->l);   /* the owner is this thread */
            return NULL;
        }
        if (atomic_load(&k->keys_gone) && strstr(dlock_last_error(), "recorded on the server"))
            k->refused_recorded++;
        th_sleep_ms(2);
    }
    return NULL;
}

/* A forward step on the node `at` (the proxy px in front of it; c reaches
 * it through px, other too or directly), which serves n[0] and n[1]: every
 * holder on the node told, cause "server clock jumped", before a contender
 * gets the lock; the contender refused for one lease by the quarantine
 * recorded on the server, then let in. */
static void forward_jump(th_proxy *px, th_redis *at, dlock_client *c, dlock_client *other,
                         char n[2][64], int64_t wd)
{
    const int64_t slack = th_slack(), period = wd / 3;
    const int64_t jump = 500 * slack;
    reset_seen();
    char spare[64];
    dlock_lock *l[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_get(c, n[i], &l[i]), DLOCK_OK);
        dlock_lock_set_lost_callback(l[i], on_lost, NULL);
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(th_int(at, "EXISTS %s", n[i]), 1);
    }
    th_sleep_ms(period + period / 2);   /* a first TIME sample to compare with */
    assert_true(th_proxy_times(px) >= 1);
    assert_int_equal(atomic_load(&lost_n), 0);

    contender k = {0};
    assert_int_equal(dlock_lock_get(other, n[0], &k.l), DLOCK_OK);
    pthread_t thr;
    assert_int_equal(pthread_create(&thr, NULL, contend, &k), 0);
    th_sleep_ms(50);
    assert_int_equal(atomic_load(&contender_won), 0);

    /* The step: TIME answers move, and the keys' TTLs shrink by as much. */
    const int64_t t_jump = th_now_ms();
    th_proxy_shift_time(px, jump * 1000);
    for (int i = 0; i < 2; i++)
        step_ttl(at, n[i], jump);
    for (int64_t until = t_jump + period + 5000 * slack;
         atomic_load(&lost_n) < 2 && th_now_ms() < until;)
        th_sleep_ms(2);
    const int64_t t_told = atomic_load(&told_at);
    printf("# forward step of %lld ms -> holders told: %lld ms (period %lld ms), %d of 2 "
           "holds, cause \"%s\"\n",
           (long long)jump, (long long)(t_told - t_jump), (long long)period,
           atomic_load(&lost_n), dlock_lost_cause_str(DLOCK_CAUSE_CLOCK_JUMP));
    assert_int_equal(atomic_load(&lost_jump), 2);
    assert_int_equal(atomic_load(&lost_other), 0);
    assert_int_equal(atomic_load(&won_before_told), 0);

    /* The quarantine recorded on the server for the lock's slot. */
    size_t qlen;
    const char *qkey = dlock__quarantine_slot_key(dlock__key_slot(n[0], strlen(n[0])), &qlen);
    int recorded = 0;
    for (int64_t until = th_now_ms() + 2000 * slack; !recorded && th_now_ms() < until;) {
        recorded = th_int(at, "EXISTS %s", qkey) == 1;
        if (!recorded)
            th_sleep_ms(5);
    }
    assert_true(recorded);
    /* This client's own acquisitions there wait too. */
    th_name(spare, sizeof(spare), "{clk}spare");
    dlock_lock *s;
    assert_int_equal(dlock_lock_get(c, spare, &s), DLOCK_OK);
    assert_int_equal(dlock_lock_try(s, 0, 10000), DLOCK_ETIMEDOUT);

    /* The step's full effect: the keys gone (a step past their TTL). */
    for (int i = 0; i < 2; i++)
        th_int(at, "DEL %s", n[i]);
    atomic_store(&k.keys_gone, 1);
    for (int64_t until = t_told + wd + 5000 * slack;
         !atomic_load(&contender_won) && th_now_ms() < until;)
        th_sleep_ms(5);
    atomic_store(&k.stop, 1);
    pthread_join(thr, NULL);
    printf("# holders told -> contender let in: %lld ms (one lease: %lld ms; refused %d times "
           "by the recorded quarantine meanwhile)\n",
           (long long)(k.won_at - t_told), (long long)wd, k.refused_recorded);
    assert_int_equal(atomic_load(&contender_won), 1);
    assert_true(k.refused_recorded > 0);
    /* The quarantine started after the holders were told, and lasts a lease
     * (the server's ms clock: a few ms of rounding). */
    assert_true(k.won_at - t_told >= wd - 50);
    assert_int_equal(k.released, DLOCK_OK);
    dlock_lock_free(k.l);
    dlock_lock_free(s);
    for (int i = 0; i < 2; i++)
        dlock_lock_free(l[i]);
}

static void test_forward_jump(void **state)
{
    (void)state;
    const int64_t wd = 3000 * th_slack();
    th_proxy *px = th_proxy_start(srv.port);
    assert_non_null(px);
    dlock_client *c = through(px, wd);
    dlock_client *other = th_client(&srv, 0);
    char n[2][64];
    for (int i = 0; i < 2; i++)
        th_name(n[i], sizeof(n[i]), "clk-held");
    forward_jump(px, &srv, c, other, n, wd);
    dlock_client_close(other);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* ------------------------------------------------------- on a cluster */

static th_cluster cl;

static int cluster_setup(void **state)
{
    (void)state;
    return th_cluster_start(&cl);
}

static int cluster_teardown(void **state)
{
    (void)state;
    th_cluster_destroy(&cl);
    return 0;
}

/* 1 when every running primary's CLUSTER SLOTS names port for `slot`. */
static int slot_names(long long slot, int port)
{
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        redisReply *rep = th_cmd(&cl.node[i], "CLUSTER SLOTS");
        int seen = 0;
        for (size_t j = 0; rep && rep->type == REDIS_REPLY_ARRAY && j < rep->elements; j++) {
            redisReply *e = rep->element[j];
            if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                e->element[0]->integer <= slot && slot <= e->element[1]->integer &&
                e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2)
                seen = e->element[2]->element[1]->integer == port;
        }
        if (rep)
            freeReplyObject(rep);
        if (!seen)
            return 0;
    }
    return 1;
}

/* On a cluster: the proxy in front of the primary that serves the names,
 * which announces the proxy's port as its own (cluster-announce-port), so
 * that clients reach it only through the proxy; the other nodes untouched. */
static void test_forward_jump_cluster(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 3000 * slack;
    char n[2][64];
    for (int i = 0; i < 2; i++) {
        char base[48];
        th_name(base, sizeof(base), "held");
        snprintf(n[i], sizeof(n[i]), "{clk}%s", base);
    }
    th_redis *at = th_cluster_node_for(&cl, n[0]);
    assert_non_null(at);
    th_proxy *px = th_proxy_start(at->port);
    assert_non_null(px);
    redisReply *r = th_cmd(at, "CONFIG SET cluster-announce-port %d", th_proxy_port(px));
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    const long long slot = th_int(at, "CLUSTER KEYSLOT %s", n[0]);
    int named = 0;
    for (int64_t until = th_now_ms() + 20000 * slack; !named && th_now_ms() < until;) {
        named = slot_names(slot, th_proxy_port(px));
        if (!named)
            th_sleep_ms(50);
    }
    assert_true(named);
    dlock_client *c = open_url(cl.url, wd);
    dlock_client *other = open_url(cl.url, wd);
    forward_jump(px, at, c, other, n, wd);
    dlock_client_close(other);
    dlock_client_close(c);
    r = th_cmd(at, "CONFIG SET cluster-announce-port 0");
    if (r)
        freeReplyObject(r);
    th_proxy_stop(px);
}

int main(void)
{
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_jump_rule),
        cmocka_unit_test(test_config),
    };
    const struct CMUnitTest live[] = {
        cmocka_unit_test(test_no_false_alarm),
        cmocka_unit_test(test_forward_jump),
    };
    const struct CMUnitTest cluster[] = {
        cmocka_unit_test(test_forward_jump_cluster),
    };
    if (getenv("TH_ONLY"))   /* TH_ONLY='*pattern*': those tests only */
        cmocka_set_test_filter(getenv("TH_ONLY"));
    int rc = cmocka_run_group_tests(unit, NULL, NULL);
    rc |= cmocka_run_group_tests(live, setup, teardown);
    return rc | cmocka_run_group_tests(cluster, cluster_setup, cluster_teardown);
}
