/* Leader election: one leader at a time, terms that only grow, resign and
 * observers woken by messages, leadership passed on within the watchdog
 * timeout + 1 s when the leader's process is killed, a leader that loses its
 * lock told (and its term over). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

#define WD 1500

typedef struct watcher {
    dlock_election *e;
    uint64_t known, got;
    int rc;
    int64_t at;
} watcher;

static void *watch(void *arg)
{
    watcher *w = arg;
    w->rc = dlock_election_await_change(
        w->e, w->known, &(dlock_wait_opts){.wait_ms = 10000 * th_slack()}, &w->got, NULL, 0);
    w->at = th_now_ms();
    return NULL;
}

/* Two candidates: one leads, the other is refused; an observer sees the
 * leader (who and term), sleeps through nothing, and wakes at the resign
 * (term 0), then at the next election (a higher term). */
static void test_campaign_resign_observe(void **state)
{
    (void)state;
    dlock_client *a = th_client(&srv, WD), *b = th_client(&srv, WD), *o = th_client(&srv, WD);
    char name[128];
    th_name(name, sizeof(name), "elect");
    dlock_election *ea, *eb, *eo;
    assert_int_equal(dlock_election_get(a, name, &ea), DLOCK_OK);
    assert_int_equal(dlock_election_get(b, name, &eb), DLOCK_OK);
    assert_int_equal(dlock_election_get(o, name, &eo), DLOCK_OK);
    uint64_t t1 = 0, t, again = 0;
    char who[400];
    assert_int_equal(dlock_election_leader(eo, &t, who, sizeof(who)), DLOCK_OK);
    assert_int_equal(t, 0);
    assert_int_equal(dlock_election_campaign(ea, &(dlock_wait_opts){.token = &t1}), DLOCK_OK);
    assert_true(t1 > 0);
    assert_int_equal(dlock_election_term(ea), t1);
    assert_int_equal(dlock_election_campaign(ea, &(dlock_wait_opts){.token = &again}), DLOCK_OK);
    assert_int_equal(again, t1);   /* leading already: the same term */
    assert_int_equal(dlock_election_campaign(eb, &(dlock_wait_opts){.wait_ms = 200, .token = &t}),
                     DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_election_term(eb), 0);
    assert_int_equal(dlock_election_leader(eo, &t, who, sizeof(who)), DLOCK_OK);
    assert_int_equal(t, t1);
    char pid[32];
    snprintf(pid, sizeof(pid), " %ld ", (long)getpid());
    assert_non_null(strstr(who, pid));
    /* Observer: wakes at the resign, by its message. */
    watcher w = {eo, t1, 99, -1, 0};
    pthread_t th;
    pthread_create(&th, NULL, watch, &w);
    th_sleep_ms(300);
    assert_int_equal(w.rc, -1);   /* still waiting: nothing changed */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_election_resign(ea), DLOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(w.got, 0);
    if (w.at - t0 > 300 * th_slack())
        fail_msg("the observer woke %lld ms after the resign", (long long)(w.at - t0));
    assert_int_equal(dlock_election_resign(ea), DLOCK_ENOTOWNER);
    /* The next leader: a higher term, observers woken by its announcement. */
    w = (watcher){eo, 0, 0, -1, 0};
    pthread_create(&th, NULL, watch, &w);
    th_sleep_ms(200);
    uint64_t t2 = 0;
    assert_int_equal(dlock_election_campaign(eb, &(dlock_wait_opts){.token = &t2}), DLOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(t2 > t1);
    assert_int_equal(w.got, t2);
    assert_int_equal(dlock_election_resign(eb), DLOCK_OK);
    dlock_election_free(ea);
    dlock_election_free(eb);
    dlock_election_free(eo);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(o);
}

/* The leader's process killed (SIGKILL): a waiting candidate leads within the
 * watchdog timeout + 1 s, with a higher term; an observer sees it. */
static void test_leader_killed(void **state)
{
    (void)state;
    char name[128], wd[16], line[128];
    th_name(name, sizeof(name), "killed");
    snprintf(wd, sizeof(wd), "%d", WD);
    int fd;
    pid_t p = th_spawn(&fd, DLOCK_TEST_WORKER, "lead", srv.url, name, wd, NULL);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 5000), 0);
    uint64_t t1 = 0;
    assert_int_equal(sscanf(line, "leader %llu", (unsigned long long *)&t1), 1);
    dlock_client *c = th_client(&srv, WD);
    dlock_election *e, *eo;
    assert_int_equal(dlock_election_get(c, name, &e), DLOCK_OK);
    assert_int_equal(dlock_election_get(c, name, &eo), DLOCK_OK);
    uint64_t t = 0;
    assert_int_equal(dlock_election_leader(eo, &t, NULL, 0), DLOCK_OK);
    assert_int_equal(t, t1);
    watcher w = {eo, t1, 0, -1, 0};
    pthread_t th;
    pthread_create(&th, NULL, watch, &w);
    kill(p, SIGKILL);
    int64_t t0 = th_now_ms();
    th_wait(p, 5000);
    uint64_t t2 = 0;
    assert_int_equal(
        dlock_election_campaign(e, &(dlock_wait_opts){.wait_ms = 10000 * th_slack(), .token = &t2}),
        DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    if (took > (WD + 1000) * th_slack())
        fail_msg("leadership passed %lld ms after the leader was killed (bound %d ms)",
                 (long long)took, WD + 1000);
    assert_true(t2 > t1);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, DLOCK_OK);   /* woken by the lock's expiry or the announcement */
    assert_true(w.got == 0 || w.got == t2);
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    close(fd);
    dlock_election_free(e);
    dlock_election_free(eo);
    dlock_client_close(c);
}

static int lost_calls;
static void on_lost(const char *n, const char *o, dlock_lost_reason r, void *ud)
{
    (void)n;
    (void)o;
    (void)r;
    (void)ud;
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* A leader whose lock someone deletes is told at once and leads no more; the
 * next campaign gets a higher term. Terms never repeat, even when the token
 * counter is gone. */
static void test_leader_revoked(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, WD);
    char name[128], tk[200];
    th_name(name, sizeof(name), "revoked");
    dlock_election *e;
    assert_int_equal(dlock_election_get(c, name, &e), DLOCK_OK);
    dlock_election_set_lost_callback(e, on_lost, NULL);
    uint64_t t1 = 0, t2 = 0, t3 = 0;
    assert_int_equal(dlock_election_campaign(e, &(dlock_wait_opts){.token = &t1}), DLOCK_OK);
    th_sleep_ms(100);   /* tracked */
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    int64_t until = th_now_ms() + 2 * WD * th_slack();
    while (__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 0 && th_now_ms() < until)
        th_sleep_ms(2);
    assert_int_equal(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST), 1);
    assert_int_equal(dlock_election_term(e), 0);
    assert_int_equal(dlock_election_resign(e), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_election_campaign(e, &(dlock_wait_opts){.token = &t2}), DLOCK_OK);
    assert_true(t2 > t1);
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    snprintf(tk, sizeof(tk), "redisson_lock_token:{%s}", name);
    freeReplyObject(th_cmd(&srv, "DEL %s", tk));
    assert_int_equal(dlock_election_campaign(e, &(dlock_wait_opts){.token = &t3}), DLOCK_OK);
    assert_true(t3 > t2);
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    dlock_election_free(e);
    dlock_client_close(c);
}

static void test_bad_input(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv, WD);
    dlock_election *e = NULL;
    uint64_t t;
    assert_int_equal(dlock_election_get(NULL, "x", &e), DLOCK_EINVAL);
    assert_int_equal(dlock_election_get(c, "", &e), DLOCK_EINVAL);
    assert_int_equal(dlock_election_get(c, "x", NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign(NULL, &(dlock_wait_opts){.token = &t}), DLOCK_EINVAL);
    assert_int_equal(dlock_election_leader(NULL, &t, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_resign(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_term(NULL), 0);
    char name[128];
    th_name(name, sizeof(name), "bad");
    assert_int_equal(dlock_election_get(c, name, &e), DLOCK_OK);
    assert_int_equal(dlock_election_leader(e, NULL, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(
        dlock_election_await_change(e, 0, &(dlock_wait_opts){.wait_ms = -5}, &t, NULL, 0),
        DLOCK_EINVAL);
    freeReplyObject(th_cmd(&srv, "SET %s not-a-lock", name));
    assert_int_equal(dlock_election_campaign(e, &(dlock_wait_opts){.token = &t}), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_election_term(e), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    dlock_election_free(e);
    dlock_election_free(NULL);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_campaign_resign_observe),
        cmocka_unit_test(test_leader_killed),
        cmocka_unit_test(test_leader_revoked),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
