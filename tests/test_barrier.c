/* The double barrier (dlock's own, issue 36.4): N parties enter and all go
 * on only once the N-th has entered; they leave and all go on only once the
 * last has left; a member whose process dies (killed, or its client closed
 * without leaving) is dropped after its lease and holds nobody for ever;
 * timeouts and cancellation withdraw a waiting entrant; bad input and keys
 * of another type are refused, nothing written. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"
#include "sync/sync.h"

/* ------------------------------------------------------------- helpers */

static dlock_barrier *barrier_on(dlock_client *c, const char *name, int64_t n)
{
    dlock_barrier *b = NULL;
    assert_int_equal(dlock_barrier_get(c, name, n, &b), DLOCK_OK);
    return b;
}

static void state_key(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "dlock_barrier:{%s}", name);
}

static int64_t members_of(dlock_barrier *b, int *open)
{
    int64_t m = -1;
    assert_int_equal(dlock_barrier_status(b, &m, NULL, open), DLOCK_OK);
    return m;
}

/* Waits up to within_ms x th_slack() until the barrier counts n members. */
static int await_members(dlock_barrier *b, int64_t n, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (members_of(b, NULL) != n && th_now_ms() < end)
        th_sleep_ms(10);
    return members_of(b, NULL) == n;
}

typedef struct party {
    dlock_barrier *b;
    int leave;               /* 0: enter, 1: leave */
    int64_t wait_ms;
    dlock_cancel *cancel;
    int rc;
    volatile int done;
    int64_t done_at;
    pthread_t t;
} party;

static void *party_main(void *arg)
{
    party *p = arg;
    dlock_wait_opts o = {.wait_ms = p->wait_ms, .cancel = p->cancel};
    p->rc = p->leave ? dlock_barrier_leave(p->b, &o) : dlock_barrier_enter(p->b, &o);
    p->done_at = th_now_ms();
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void start(party *p, dlock_barrier *b, int leave, int64_t wait_ms, dlock_cancel *cancel)
{
    p->b = b;
    p->leave = leave;
    p->wait_ms = wait_ms;
    p->cancel = cancel;
    p->rc = -1000;
    p->done = 0;
    assert_int_equal(pthread_create(&p->t, NULL, party_main, p), 0);
}

static int is_done(const party *p) { return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE); }

/* ------------------------------------------------------------- enter, leave */

/* N = 4 parties in threads: none passes enter before the 4th arrives, and
 * all pass once it does; likewise for leave. The round ends with its keys. */
static void test_enter_leave(void **state)
{
    (void)state;
    enum { N = 4 };
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-all");
    state_key(name, key, sizeof(key));
    dlock_barrier *b[N];
    party p[N];
    for (int i = 0; i < N; i++)
        b[i] = barrier_on(cli, name, N);
    for (int i = 0; i < N - 1; i++)
        start(&p[i], b[i], 0, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_members(b[0], N - 1, 5000));
    th_sleep_ms(300);
    int open = -1;
    assert_int_equal(members_of(b[0], &open), N - 1);
    assert_int_equal(open, 0);
    for (int i = 0; i < N - 1; i++) {
        assert_false(is_done(&p[i]));
        assert_int_equal(dlock_barrier_phase(b[i]), DLOCK_BARRIER_ENTERING);
    }
    int64_t t0 = th_now_ms();
    start(&p[N - 1], b[N - 1], 0, DLOCK_WAIT_FOREVER, NULL);
    for (int i = 0; i < N; i++) {
        pthread_join(p[i].t, NULL);
        assert_int_equal(p[i].rc, DLOCK_OK);
        assert_true(p[i].done_at - t0 < 1000 * th_slack());
        assert_int_equal(dlock_barrier_phase(b[i]), DLOCK_BARRIER_IN);
        assert_true(dlock_barrier_round(b[i]) != 0);
        assert_int_equal(dlock_barrier_round(b[i]), dlock_barrier_round(b[0]));
    }
    assert_int_equal(members_of(b[0], &open), N);
    assert_int_equal(open, 1);
    /* Leave: the first three wait for the fourth. */
    for (int i = 0; i < N - 1; i++)
        start(&p[i], b[i], 1, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_members(b[N - 1], 1, 5000));
    th_sleep_ms(300);
    for (int i = 0; i < N - 1; i++)
        assert_false(is_done(&p[i]));
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 1);
    t0 = th_now_ms();
    start(&p[N - 1], b[N - 1], 1, DLOCK_WAIT_FOREVER, NULL);
    for (int i = 0; i < N; i++) {
        pthread_join(p[i].t, NULL);
        assert_int_equal(p[i].rc, DLOCK_OK);
        assert_true(p[i].done_at - t0 < 1000 * th_slack());
        assert_int_equal(dlock_barrier_phase(b[i]), DLOCK_BARRIER_OUT);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    /* Reusable: the next round gathers anew, with another id. */
    uint64_t first = dlock_barrier_round(b[0]);
    for (int i = 0; i < N; i++)
        start(&p[i], b[i], 0, DLOCK_WAIT_FOREVER, NULL);
    for (int i = 0; i < N; i++) {
        pthread_join(p[i].t, NULL);
        assert_int_equal(p[i].rc, DLOCK_OK);
        assert_true(dlock_barrier_round(b[i]) != first);
    }
    for (int i = 0; i < N; i++)
        start(&p[i], b[i], 1, DLOCK_WAIT_FOREVER, NULL);
    for (int i = 0; i < N; i++) {
        pthread_join(p[i].t, NULL);
        assert_int_equal(p[i].rc, DLOCK_OK);
        dlock_barrier_free(b[i]);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
}

/* Parties on different clients (connections) meet as well; one party alone
 * (N = 1) passes at once. */
static void test_clients(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "barrier-clients");
    dlock_client *c2 = th_client(&srv, 0);
    dlock_barrier *a = barrier_on(cli, name, 2), *b = barrier_on(c2, name, 2);
    party p;
    start(&p, a, 0, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_members(b, 1, 5000));
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    start(&p, a, 1, DLOCK_WAIT_FOREVER, NULL);
    assert_int_equal(dlock_barrier_leave(b, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    dlock_barrier_free(a);
    dlock_barrier_free(b);
    dlock_client_close(c2);

    th_name(name, sizeof(name), "barrier-one");
    dlock_barrier *one = barrier_on(cli, name, 1);
    assert_int_equal(dlock_barrier_enter(one, NULL), DLOCK_OK);
    assert_int_equal(dlock_barrier_leave(one, NULL), DLOCK_OK);
    dlock_barrier_free(one);
}

/* ------------------------------------------------------- timeouts, cancel */

static void test_timeouts(void **state)
{
    (void)state;
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-timeout");
    state_key(name, key, sizeof(key));
    dlock_barrier *a = barrier_on(cli, name, 2), *b = barrier_on(cli, name, 2);
    /* An entrant alone times out and withdraws: nothing is left behind. */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_barrier_enter(a, &(dlock_wait_opts){.wait_ms = 300}), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 290);
    assert_true(took < 300 + 1000 * th_slack());
    assert_non_null(strstr(dlock_last_error(), "1 of 2 parties"));
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_OUT);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    /* One try (no options) with nobody else there. */
    assert_int_equal(dlock_barrier_enter(a, NULL), DLOCK_ETIMEDOUT);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    /* A withdrawn entrant is not counted: b alone does not pass either. */
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = 100}), DLOCK_ETIMEDOUT);

    /* Leave times out while the other is in; the leaver is out all the same. */
    party p;
    start(&p, a, 0, DLOCK_WAIT_FOREVER, NULL);
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    t0 = th_now_ms();
    assert_int_equal(dlock_barrier_leave(a, &(dlock_wait_opts){.wait_ms = 300}), DLOCK_ETIMEDOUT);
    took = th_now_ms() - t0;
    assert_true(took >= 290);
    assert_true(took < 300 + 1000 * th_slack());
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_OUT);
    assert_int_equal(members_of(b, NULL), 1);
    /* A leaver that is out cannot leave again; b, the last, passes at once. */
    assert_int_equal(dlock_barrier_leave(a, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_leave(b, NULL), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    dlock_barrier_free(a);
    dlock_barrier_free(b);
}

static void test_cancel(void **state)
{
    (void)state;
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-cancel");
    state_key(name, key, sizeof(key));
    dlock_barrier *a = barrier_on(cli, name, 3);
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    party p;
    start(&p, a, 0, DLOCK_WAIT_FOREVER, tok);
    assert_true(await_members(a, 1, 5000));
    th_sleep_ms(100);
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_ECANCELED);
    assert_true(p.done_at - t0 < 500 * th_slack());
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_OUT);
    assert_int_equal(members_of(a, NULL), 0);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    dlock_cancel_free(tok);
    dlock_barrier_free(a);
}

/* ------------------------------------------------------------ dead members */

/* A member whose process is killed while it waits to enter is dropped after
 * its lease: it opens no round for the others. One killed after its round
 * opened holds the others' leave up to its lease, no longer. */
static void test_killed_member(void **state)
{
    (void)state;
    enum { WD = 600 };
    char name[128], wd[16], key[200];
    snprintf(wd, sizeof(wd), "%d", WD);
    th_name(name, sizeof(name), "barrier-killed");
    state_key(name, key, sizeof(key));
    dlock_barrier *a = barrier_on(cli, name, 2);

    int fd;
    char line[128];
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "barrier", srv.url, name, "3", wd, NULL);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "entering");
    dlock_barrier *a3 = barrier_on(cli, name, 3);
    assert_true(await_members(a3, 1, 5000));
    /* Alive, it stays past its lease: the worker's watchdog renews it. */
    th_sleep_ms(2 * WD);
    assert_int_equal(members_of(a3, NULL), 1);
    kill(pid, SIGKILL);
    th_wait(pid, 5000);
    close(fd);
    int64_t t0 = th_now_ms();
    assert_true(await_members(a3, 0, WD + 1000));
    assert_true(th_now_ms() - t0 >= WD / 2);
    dlock_barrier_free(a3);
    /* Dropped: a round of 2 needs two live parties again. */
    assert_int_equal(dlock_barrier_enter(a, &(dlock_wait_opts){.wait_ms = 100}), DLOCK_ETIMEDOUT);

    /* Killed after the round opened: a's leave waits for its lease. */
    pid = th_spawn(&fd, DLOCK_TEST_WORKER, "barrier", srv.url, name, "2", wd, NULL);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "entering");
    assert_int_equal(dlock_barrier_enter(a, &(dlock_wait_opts){.wait_ms = 10000}), DLOCK_OK);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    char want[64];
    snprintf(want, sizeof(want), "in %llu", (unsigned long long)dlock_barrier_round(a));
    assert_string_equal(line, want);
    kill(pid, SIGKILL);
    th_wait(pid, 5000);
    close(fd);
    t0 = th_now_ms();
    assert_int_equal(dlock_barrier_leave(a, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}),
                     DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    assert_true(took < WD + 1000 * th_slack());
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    dlock_barrier_free(a);
}

/* A client closed without leaving: its members stop being renewed and are
 * dropped after their lease; the others' leave goes on then. */
static void test_closed_client(void **state)
{
    (void)state;
    enum { WD = 500 };
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-closed");
    state_key(name, key, sizeof(key));
    dlock_client *c2 = th_client(&srv, WD);
    dlock_barrier *a = barrier_on(cli, name, 2), *b = barrier_on(c2, name, 2);
    party p;
    start(&p, a, 0, DLOCK_WAIT_FOREVER, NULL);
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    th_sleep_ms(2 * WD);   /* renewed while its client lives */
    assert_int_equal(members_of(a, NULL), 2);
    dlock_barrier_free(b);
    dlock_client_close(c2);
    int64_t t0 = th_now_ms();
    start(&p, a, 1, DLOCK_WAIT_FOREVER, NULL);
    th_sleep_ms(WD / 4);
    assert_false(is_done(&p));
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    assert_true(p.done_at - t0 < WD + 1000 * th_slack());
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    dlock_barrier_free(a);
}

/* The lost callback: a member whose keys were deleted (as by an operator)
 * while it was in is reported once, with the state key and its id; its
 * leave then answers DLOCK_ENOTOWNER and leaves the handle out. */
typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    char name[256], owner[DLOCK_OWNER_MAX + 1];
} lost_log;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)reason;
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->owner, sizeof(g->owner), "%s", owner);
    pthread_mutex_unlock(&g->mu);
}

static int lost_calls(lost_log *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void test_lost(void **state)
{
    (void)state;
    enum { WD = 600 };
    static lost_log g = {PTHREAD_MUTEX_INITIALIZER, 0, "", ""};
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD), DLOCK_OK);
    assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, &g), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[128], key[200], mkey[220];
    th_name(name, sizeof(name), "barrier-lost");
    state_key(name, key, sizeof(key));
    snprintf(mkey, sizeof(mkey), "%s:members", key);
    dlock_barrier *b = barrier_on(c, name, 1);
    assert_int_equal(dlock_barrier_enter(b, NULL), DLOCK_OK);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 0);   /* renewed, not lost */
    assert_int_equal(th_int(&srv, "EXISTS %s", mkey), 1);
    freeReplyObject(th_cmd(&srv, "DEL %s", key));
    freeReplyObject(th_cmd(&srv, "DEL %s", mkey));
    int64_t end = th_now_ms() + (WD + 1000) * th_slack();
    while (lost_calls(&g) == 0 && th_now_ms() < end)
        th_sleep_ms(10);
    assert_int_equal(lost_calls(&g), 1);
    assert_string_equal(g.name, key);
    assert_string_equal(g.owner, dlock_barrier_member(b));
    assert_int_equal(dlock_barrier_leave(b, NULL), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "was dropped"));
    assert_int_equal(dlock_barrier_phase(b), DLOCK_BARRIER_OUT);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(&g), 1);
    dlock_barrier_free(b);
    dlock_client_close(c);
}

/* ------------------------------------------------------------------ async */

typedef struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls, ok, last;
    uint64_t token;
    int64_t count;
    int flag;
} rec;

static void on_rec(const dlock_async_result *res, void *ud)
{
    rec *r = ud;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->last = dlock_async_status(res);
    r->ok += r->last == DLOCK_OK;
    r->token = dlock_async_token(res);
    r->count = dlock_async_count(res);
    r->flag = dlock_async_flag(res);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void rec_init(rec *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static int rec_wait(rec *r, int calls, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    pthread_mutex_lock(&r->mu);
    while (r->calls < calls && th_now_ms() < end) {
        pthread_mutex_unlock(&r->mu);
        th_sleep_ms(5);
        pthread_mutex_lock(&r->mu);
    }
    int n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void rec_done(rec *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* The asynchronous forms: the callbacks run once the round opens / ends,
 * with the round's id and N; status; a timed-out enter withdraws. */
static void test_async(void **state)
{
    (void)state;
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-async");
    state_key(name, key, sizeof(key));
    dlock_barrier *a = barrier_on(cli, name, 3), *b = barrier_on(cli, name, 3),
                  *c = barrier_on(cli, name, 3);
    rec w;
    rec_init(&w);
    const dlock_wait_opts forever = {.wait_ms = DLOCK_WAIT_FOREVER};
    assert_int_equal(dlock_barrier_enter_async(a, &forever, on_rec, &w), DLOCK_OK);
    assert_int_equal(dlock_barrier_enter_async(b, &forever, on_rec, &w), DLOCK_OK);
    assert_true(await_members(c, 2, 5000));
    th_sleep_ms(200);
    assert_int_equal(rec_wait(&w, 0, 0), 0);
    rec st;
    rec_init(&st);
    assert_int_equal(dlock_barrier_status_async(c, on_rec, &st), DLOCK_OK);
    assert_int_equal(rec_wait(&st, 1, 5000), 1);
    assert_int_equal(st.last, DLOCK_OK);
    assert_int_equal(st.count, 2);
    assert_int_equal(st.flag, 0);
    assert_true(st.token != 0);
    assert_int_equal(dlock_barrier_enter(c, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 2, 5000), 2);
    assert_int_equal(w.ok, 2);
    assert_int_equal(w.token, dlock_barrier_round(c));
    assert_int_equal(w.token, st.token);
    assert_int_equal(w.count, 3);
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_IN);
    rec_done(&w);
    rec_init(&w);
    assert_int_equal(dlock_barrier_leave_async(a, &forever, on_rec, &w), DLOCK_OK);
    assert_int_equal(dlock_barrier_leave_async(b, &forever, on_rec, &w), DLOCK_OK);
    assert_true(await_members(c, 1, 5000));
    th_sleep_ms(200);
    assert_int_equal(rec_wait(&w, 0, 0), 0);
    assert_int_equal(dlock_barrier_leave(c, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 2, 5000), 2);
    assert_int_equal(w.ok, 2);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    rec_done(&w);
    rec_init(&w);
    assert_int_equal(
        dlock_barrier_enter_async(a, &(dlock_wait_opts){.wait_ms = 200}, on_rec, &w), DLOCK_OK);
    assert_int_equal(rec_wait(&w, 1, 5000), 1);
    assert_int_equal(w.last, DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_OUT);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    rec_done(&w);
    /* A cancelled asynchronous enter withdraws (sent before its callback runs,
     * not awaited). */
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    rec_init(&w);
    assert_int_equal(dlock_barrier_enter_async(
                         a, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .cancel = tok},
                         on_rec, &w),
                     DLOCK_OK);
    assert_true(await_members(b, 1, 5000));
    dlock_cancel_fire(tok);
    assert_int_equal(rec_wait(&w, 1, 5000), 1);
    assert_int_equal(w.last, DLOCK_ECANCELED);
    assert_int_equal(dlock_barrier_phase(a), DLOCK_BARRIER_OUT);
    assert_true(await_members(b, 0, 5000));
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);
    rec_done(&w);
    dlock_cancel_free(tok);
    rec_done(&st);
    dlock_barrier_free(a);
    dlock_barrier_free(b);
    dlock_barrier_free(c);
}

/* ------------------------------------------------------------ bad input */

static void test_bad_input(void **state)
{
    (void)state;
    char name[128], key[200];
    th_name(name, sizeof(name), "barrier-bad");
    state_key(name, key, sizeof(key));
    const int64_t bad[] = {0, -1, DLOCK_BARRIER_PARTIES_MAX + 1};
    for (int i = 0; i < 3; i++) {
        dlock_barrier *x = (dlock_barrier *)1;
        assert_int_equal(dlock_barrier_get(cli, name, bad[i], &x), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "parties"));
        assert_null(x);
    }
    dlock_barrier *x = (dlock_barrier *)1;
    assert_int_equal(dlock_barrier_get(cli, "", 2, &x), DLOCK_EINVAL);
    assert_null(x);
    assert_int_equal(dlock_barrier_get(cli, NULL, 2, &x), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_get_as(cli, name, 2, NULL, &x), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "member"));
    assert_int_equal(dlock_barrier_get_as(cli, name, 2, "no-colon", &x), DLOCK_EINVAL);

    dlock_barrier *b = barrier_on(cli, name, 2);
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = -2}), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.lease_ms = 1000}), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_leave(b, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "has not entered"));
    assert_int_equal(dlock_barrier_enter(NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_leave(NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_barrier_status(NULL, NULL, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(th_int(&srv, "EXISTS %s", key), 0);

    /* Another N than the round's: refused, nothing written. */
    party p;
    start(&p, b, 0, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_members(b, 1, 5000));
    dlock_barrier *three = barrier_on(cli, name, 3);
    redisReply *before = th_cmd(&srv, "HGETALL %s", key);
    assert_int_equal(dlock_barrier_enter(three, &(dlock_wait_opts){.wait_ms = 100}),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "round of 2 parties"));
    redisReply *after = th_cmd(&srv, "HGETALL %s", key);
    assert_int_equal(before->elements, after->elements);
    for (size_t i = 0; i < before->elements; i++)
        assert_string_equal(before->element[i]->str, after->element[i]->str);
    freeReplyObject(before);
    freeReplyObject(after);
    assert_int_equal(members_of(b, NULL), 1);
    /* The same handle entering twice at once: the second is refused. */
    assert_int_equal(dlock_barrier_enter(b, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "entering already"));
    dlock_barrier *two = barrier_on(cli, name, 2);
    assert_int_equal(dlock_barrier_enter(two, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    assert_int_equal(dlock_barrier_enter(b, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "entered already"));
    start(&p, b, 1, DLOCK_WAIT_FOREVER, NULL);
    assert_int_equal(dlock_barrier_leave(two, &(dlock_wait_opts){.wait_ms = 5000}), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, DLOCK_OK);
    dlock_barrier_free(three);
    dlock_barrier_free(two);
    dlock_barrier_free(b);
    dlock_barrier_free(NULL);
}

static void test_wrong_type(void **state)
{
    (void)state;
    const char *kinds[] = {"SET %s v", "HSET %s f v", "SADD %s m", "SET %s:members v"};
    for (size_t k = 0; k < 4; k++) {
        char name[128], key[200], mkey[220];
        th_name(name, sizeof(name), "barrier-wrong");
        state_key(name, key, sizeof(key));
        snprintf(mkey, sizeof(mkey), "%s:members", key);
        freeReplyObject(th_cmd(&srv, kinds[k], key));
        const char *target = k == 3 ? mkey : key;
        redisReply *before = th_cmd(&srv, "DUMP %s", target);
        dlock_barrier *b = barrier_on(cli, name, 2);
        assert_int_equal(dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = 200}),
                         DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_barrier_phase(b), DLOCK_BARRIER_OUT);
        assert_int_equal(dlock_barrier_status(b, NULL, NULL, NULL), DLOCK_EWRONGTYPE);
        redisReply *after = th_cmd(&srv, "DUMP %s", target);
        assert_int_equal(before->len, after->len);
        assert_memory_equal(before->str, after->str, before->len);
        assert_int_equal(th_int(&srv, "EXISTS %s", k == 3 ? key : mkey), 0);
        freeReplyObject(before);
        freeReplyObject(after);
        dlock_barrier_free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_leave),
        cmocka_unit_test(test_clients),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_killed_member),
        cmocka_unit_test(test_closed_client),
        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrong_type),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
