/* The shared connection (net/mux.c): many threads' requests pipelined on
 * one connection per node. What a user sees when that connection fails with
 * requests of several threads in flight, when one of them times out, and
 * when Redis lost its scripts while several went out together. Through a
 * proxy in front of the fixture's server (one server only). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"
#include "proxy.h"

enum { N = 8 };

static dlock_client *client_via(th_proxy *px, int64_t command_timeout_ms)
{
    char url[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, command_timeout_ms), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 3, 50), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

/* A proxy before the server (*px), a client through it and N lock handles
 * on it, named after tag. Skips the test on a deployment. */
static dlock_client *locks_via(th_proxy **px, int64_t command_timeout_ms, const char *tag,
                               char names[N][128], dlock_lock *locks[N])
{
    if (th_deployed(&srv))
        skip();   /* a proxy before one server */
    *px = th_proxy_start(srv.port);
    dlock_client *c = client_via(*px, command_timeout_ms);
    for (int i = 0; i < N; i++) {
        char t[32];
        snprintf(t, sizeof(t), "%s%d", tag, i);
        th_name(names[i], sizeof(names[i]), t);
        assert_int_equal(dlock_lock_get(c, names[i], &locks[i]), DLOCK_OK);
    }
    return c;
}

typedef struct job {
    dlock_lock *l;
    int read;                /* is_locked (idempotent), else acquire (not) */
    pthread_barrier_t *go;
    int rc;
    int locked;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    pthread_barrier_wait(j->go);
    j->rc = j->read ? dlock_lock_is_locked(j->l, &j->locked) : dlock_lock_acquire(j->l, 60000);
    return NULL;
}

/* N threads' requests in flight on the shared connection when it drops:
 * each caller gets its own request's outcome. An acquire (not idempotent)
 * that Redis ran: DLOCK_EUNKNOWN, and it ran once; a query (idempotent) is
 * sent again on a new connection and answers right. */
static void test_drop_with_requests_in_flight(void **state)
{
    (void)state;
    if (th_deployed(&srv))
        skip();   /* a proxy before one server */
    th_proxy *px = th_proxy_start(srv.port);
    dlock_client *c = client_via(px, 20000);   /* the drop, not a timeout, ends them */
    char names[N][128];
    job jobs[N];
    pthread_t th[N];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N + 1);
    for (int i = 0; i < N; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "drop%d", i);
        th_name(names[i], sizeof(names[i]), tag);
        jobs[i] = (job){.read = i % 2, .go = &go, .rc = -99, .locked = -1};
        assert_int_equal(dlock_lock_get(c, names[i], &jobs[i].l), DLOCK_OK);
        if (jobs[i].read)   /* held by someone else: the query must say so */
            freeReplyObject(th_cmd(&srv, "HSET %s other:1 1", names[i]));
    }
    /* The shared connection is open (through the proxy), the scripts loaded;
     * the TYPE calls an acquire's script makes, counted (below). */
    long long t0 = th_calls(&srv, "type");
    assert_int_equal(dlock_lock_acquire(jobs[0].l, 60000), DLOCK_OK);
    const long long types_per_acquire = th_calls(&srv, "type") - t0;
    assert_int_equal(dlock_lock_release(jobs[0].l), DLOCK_OK);
    const long long evalsha0 = th_calls(&srv, "evalsha"), type0 = th_calls(&srv, "type");
    th_proxy_swallow_replies(px);
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    pthread_barrier_wait(&go);
    /* Every request has reached Redis (and run); none has its reply. Counted
     * by command, as Redis counts the commands a script calls too: the
     * acquires are the EVALSHAs, the queries the TYPEs their scripts did not
     * call. (A count of all calls reached N with some threads' requests not
     * sent yet; on a loaded CPU such an acquire went out on the new
     * connection and was answered DLOCK_OK.) */
    int64_t until = th_now_ms() + 5000 * th_slack();
    long long acquires = 0, queries = 0;
    for (;;) {
        acquires = th_calls(&srv, "evalsha") - evalsha0;
        queries = th_calls(&srv, "type") - type0 - acquires * types_per_acquire;
        if ((acquires >= N / 2 && queries >= N / 2) || th_now_ms() >= until)
            break;
        th_sleep_ms(5);
    }
    assert_int_equal(acquires, N / 2);
    assert_int_equal(queries, N / 2);
    th_proxy_cut(px);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        if (jobs[i].read) {
            assert_int_equal(jobs[i].rc, DLOCK_OK);
            assert_int_equal(jobs[i].locked, 1);
        } else {
            assert_int_equal(jobs[i].rc, DLOCK_EUNKNOWN);
            /* It ran once: one hold, counted once. */
            assert_int_equal(th_int(&srv, "HLEN %s", names[i]), 1);
            redisReply *r = th_cmd(&srv, "HVALS %s", names[i]);
            assert_string_equal(r->element[0]->str, "1");
            freeReplyObject(r);
        }
    }
    /* The client goes on, on a new connection. */
    for (int i = 0; i < N; i += 2) {
        int64_t n = -1;
        assert_int_equal(dlock_lock_hold_count(jobs[i].l, &n), DLOCK_OK);
        assert_int_equal(n, 0);   /* run by the acquiring thread, not this one */
    }
    for (int i = 0; i < N; i++) {
        freeReplyObject(th_cmd(&srv, "DEL %s", names[i]));
        dlock_lock_free(jobs[i].l);
    }
    pthread_barrier_destroy(&go);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* ------------------------------------------- holds of unknown outcome */

typedef int (*lock_get_fn)(dlock_client *, const char *, dlock_lock **);

typedef struct cutter {
    th_proxy *px;
    long long before;        /* the server's calls before the acquire */
    int ran;
} cutter;

/* Cuts the proxy's connections once the acquire ran (its reply swallowed),
 * or, when it must not run, while its request is held in the blackholed
 * proxy (then dropped with the connection). */
static void *cut_later(void *arg)
{
    cutter *k = arg;
    if (k->ran) {
        int64_t until = th_now_ms() + 5000 * th_slack();
        while (th_calls(&srv, NULL) <= k->before && th_now_ms() < until)
            th_sleep_ms(5);
    } else {
        th_sleep_ms(200 * th_slack());
    }
    th_proxy_cut(k->px);
    if (!k->ran) {
        th_sleep_ms(50);
        th_proxy_blackhole(k->px, 0);
    }
    return NULL;
}

/* An acquisition of l (lease: ms or DLOCK_WATCHDOG) on the calling thread whose connection
 * is cut with the request in flight: it ran in Redis (ran) or did not. */
static int unknown_acquire(th_proxy *px, dlock_lock *l, int ran, int64_t lease)
{
    cutter k = {.px = px, .before = th_calls(&srv, NULL), .ran = ran};
    if (ran)
        th_proxy_swallow_replies(px);
    else
        th_proxy_blackhole(px, 1);
    pthread_t t;
    pthread_create(&t, NULL, cut_later, &k);
    int rc = dlock_lock_acquire(l, lease);
    pthread_join(t, NULL);
    return rc;
}

/* Another client (not through the proxy) takes the name at once. */
static void others_get_it(lock_get_fn get, const char *name)
{
    dlock_client *c2 = th_client(&srv, 30000);
    dlock_lock *l2 = NULL;
    assert_int_equal(get(c2, name, &l2), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l2, 0, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_close(c2);
}

typedef struct unk_case {
    th_proxy *px;
    dlock_client *c;
    dlock_lock *l;
    char name[128];
    char field[DLOCK_OWNER_BUFSIZE];   /* the owner id */
    char hfield[DLOCK_OWNER_BUFSIZE + 8];   /* its field in the hash */
} unk_case;

/* A client through a proxy, its connection warmed (scripts loaded), and a
 * handle of the type for the calling thread, or for an explicit owner. */
static void unk_open(unk_case *u, lock_get_fn get, const char *tag, int explicit_owner)
{
    if (th_deployed(&srv))
        skip();   /* a proxy before one server */
    u->px = th_proxy_start(srv.port);
    u->c = client_via(u->px, 20000);
    th_name(u->name, sizeof(u->name), tag);
    if (explicit_owner) {
        assert_int_equal(dlock_client_new_owner_id(u->c, u->field, sizeof(u->field)),
                         DLOCK_OK);
        int rc = get == dlock_fair_lock_get
                     ? dlock_fair_lock_get_as(u->c, u->name, u->field, &u->l)
                     : dlock_lock_get_as(u->c, u->name, u->field, &u->l);
        assert_int_equal(rc, DLOCK_OK);
    } else {
        assert_int_equal(dlock_client_owner_id(u->c, u->field, sizeof(u->field)), DLOCK_OK);
        assert_int_equal(get(u->c, u->name, &u->l), DLOCK_OK);
    }
    snprintf(u->hfield, sizeof(u->hfield), "%s%s", u->field,
             get == dlock_write_lock_get ? ":write" : "");
    assert_int_equal(dlock_lock_acquire(u->l, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(u->l), DLOCK_OK);
}

static void unk_close(unk_case *u)
{
    freeReplyObject(th_cmd(&srv, "DEL %s", u->name));
    dlock_lock_free(u->l);
    dlock_client_close(u->c);
    th_proxy_stop(u->px);
}

/* An acquire that ran but ended DLOCK_EUNKNOWN, then the owner's acquire
 * and release: the release ends the unknown hold too. */
static void unknown_ran_then_release(lock_get_fn get, int reentries, int64_t lease)
{
    unk_case u;
    unk_open(&u, get, "unkran", 0);
    assert_int_equal(unknown_acquire(u.px, u.l, 1, lease), DLOCK_EUNKNOWN);
    assert_int_equal(th_int(&srv, "HEXISTS %s %s", u.name, u.hfield), 1);   /* it ran */
    for (int i = 0; i <= reentries; i++)
        assert_int_equal(dlock_lock_acquire(u.l, lease), DLOCK_OK);
    for (int i = 0; i < reentries; i++) {
        assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
        /* A known hold is left: still held, the unknown one with it. */
        redisReply *r = th_cmd(&srv, "HGET %s %s", u.name, u.hfield);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_int_equal(atoi(r->str), reentries - i + 1);
        freeReplyObject(r);
    }
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    others_get_it(get, u.name);
    /* Nothing is owed any more: a new hold is released once. */
    assert_int_equal(dlock_lock_acquire(u.l, 60000), DLOCK_OK);
    long long before = th_calls(&srv, "evalsha");
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(th_calls(&srv, "evalsha") - before, 1);
    unk_close(&u);
}

/* An acquire that never reached Redis ended DLOCK_EUNKNOWN: the owner's
 * next hold is released with exactly one release. */
static void unknown_not_run(lock_get_fn get)
{
    unk_case u;
    unk_open(&u, get, "unknot", 0);
    long long before = th_calls(&srv, "evalsha");
    assert_int_equal(unknown_acquire(u.px, u.l, 0, 60000), DLOCK_EUNKNOWN);
    assert_int_equal(th_calls(&srv, "evalsha"), before);   /* it did not run */
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    assert_int_equal(dlock_lock_acquire(u.l, 60000), DLOCK_OK);
    before = th_calls(&srv, "evalsha");
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(th_calls(&srv, "evalsha") - before, 1);
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    unk_close(&u);
}

/* Two known holds under the watchdog (which alone counts them: the client
 * keeps no record of such holds), then an acquire of unknown outcome that
 * ran or not: the first release takes one known hold only, the second ends
 * the owner's holds, the unknown one with them. */
/* The cases: a lock type, re-entries, the lease of every acquire. */
typedef struct unk_kind {
    lock_get_fn get;
    int reentries;
    int64_t lease;           /* ms, or DLOCK_WATCHDOG */
} unk_kind;

static int count_of(const unk_case *u)
{
    redisReply *r = th_cmd(&srv, "HGET %s %s", u->name, u->hfield);
    assert_non_null(r);
    int n = r->type == REDIS_REPLY_STRING ? atoi(r->str) : -1;
    freeReplyObject(r);
    return n;
}

static void known_then_unknown(lock_get_fn get, int ran)
{
    unk_case u;
    unk_open(&u, get, ran ? "kthenran" : "kthennot", 0);
    assert_int_equal(dlock_lock_acquire(u.l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(u.l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(100 * th_slack());   /* its registering renewal done: not taken for the acquire */
    assert_int_equal(unknown_acquire(u.px, u.l, ran, DLOCK_WATCHDOG), DLOCK_EUNKNOWN);
    assert_int_equal(count_of(&u), ran ? 3 : 2);
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(count_of(&u), ran ? 2 : 1);
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    others_get_it(get, u.name);
    unk_close(&u);
}

static void test_known_then_unknown_ran(void **state)
{
    const unk_kind *k = *state;
    known_then_unknown(k->get, 1);
}

static void test_known_then_unknown_not_run(void **state)
{
    const unk_kind *k = *state;
    known_then_unknown(k->get, 0);
}

/* One owner, two handles of one lock: A without a lock-delay, B with one
 * (the watchdog keeps B's holds apart from A's). A's two holds and B's one,
 * then an acquire through B of unknown outcome that did not run: each
 * release takes one hold, none takes A's. */
static void test_known_then_unknown_delay_handle(void **state)
{
    (void)state;
    unk_case u;
    unk_open(&u, dlock_lock_get, "kthendelay", 0);
    dlock_lock *b;
    assert_int_equal(dlock_lock_get(u.c, u.name, &b), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(b, 100), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(u.l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(u.l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(100 * th_slack());   /* the registering renewals done: not taken for the acquire */
    assert_int_equal(unknown_acquire(u.px, b, 0, DLOCK_WATCHDOG), DLOCK_EUNKNOWN);
    assert_int_equal(count_of(&u), 3);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(count_of(&u), 2);
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(count_of(&u), 1);
    assert_int_equal(dlock_lock_release(u.l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    dlock_lock_free(b);
    unk_close(&u);
}

static void test_unknown_ran(void **state)
{
    const unk_kind *k = *state;
    unknown_ran_then_release(k->get, k->reentries, k->lease);
}

static void test_unknown_not_run(void **state)
{
    const unk_kind *k = *state;
    unknown_not_run(k->get);
}

typedef struct rel_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int status;
} rel_wait;

static void on_released(const dlock_async_result *res, void *ud)
{
    rel_wait *w = ud;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    w->status = dlock_async_status(res);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The same through an asynchronous release (an explicit owner). */
static void unknown_ran_async(lock_get_fn get)
{
    unk_case u;
    unk_open(&u, get, "unkasync", 1);
    assert_int_equal(unknown_acquire(u.px, u.l, 1, 60000), DLOCK_EUNKNOWN);
    assert_int_equal(dlock_lock_acquire(u.l, 60000), DLOCK_OK);
    rel_wait w = {.status = -99};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    assert_int_equal(dlock_lock_release_async(u.l, on_released, &w), DLOCK_OK);
    int64_t until = th_now_ms() + 10000 * th_slack();
    pthread_mutex_lock(&w.mu);
    while (w.calls == 0 && th_now_ms() < until) {
        pthread_mutex_unlock(&w.mu);
        th_sleep_ms(5);
        pthread_mutex_lock(&w.mu);
    }
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.status, DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", u.name), 0);
    others_get_it(get, u.name);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    unk_close(&u);
}

static void test_unknown_ran_async(void **state)
{
    const unk_kind *k = *state;
    unknown_ran_async(k->get);
}

typedef struct timed {
    dlock_lock *l;
    char msg[512];
    int64_t start_ms;        /* when to call */
    int rc;
    int64_t count;           /* its hold count afterwards, from its own thread */
} timed;

static void *run_timed(void *arg)
{
    timed *t = arg;
    int64_t d = t->start_ms - th_now_ms();
    if (d > 0)
        th_sleep_ms(d);
    t->rc = dlock_lock_acquire(t->l, 60000);
    snprintf(t->msg, sizeof(t->msg), "%s", dlock_last_error());
    t->count = -1;
    if (dlock_lock_hold_count(t->l, &t->count) != DLOCK_OK)
        t->count = -2;
    return NULL;
}

/* One request times out while another is in flight behind it on the same
 * connection: the late caller still gets its own reply, not the one of the
 * request that gave up. flush: Redis lost its scripts first, so the late
 * caller's reply is NOSCRIPT, and the connection it would load the script on
 * was given up meanwhile. */
static void timeout_keeps_the_others_replies(int flush)
{
    if (th_deployed(&srv))
        skip();   /* a proxy before one server */
    const int64_t T = 400 * th_slack();   /* the command timeout */
    th_proxy *px = th_proxy_start(srv.port);
    dlock_client *c = client_via(px, T);
    char na[128], nb[128];
    timed a = {.rc = -99}, b = {.rc = -99};
    assert_int_equal(dlock_lock_get(c, th_name(na, sizeof(na), "late-a"), &a.l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(nb, sizeof(nb), "late-b"), &b.l), DLOCK_OK);
    /* The shared connection is open, the scripts loaded. */
    assert_int_equal(dlock_lock_acquire(a.l, 60000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a.l), DLOCK_OK);
    /* Nothing passes: a's request waits out its timeout; b's goes out half
     * way through it, on the same connection. */
    if (flush)
        freeReplyObject(th_cmd(&srv, "SCRIPT FLUSH"));
    th_proxy_blackhole(px, 1);
    int64_t t0 = th_now_ms();
    a.start_ms = t0;
    b.start_ms = t0 + T / 2;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_timed, &a);
    pthread_create(&tb, NULL, run_timed, &b);
    th_sleep_ms(T + T / 8);   /* a timed out; b has 3/8 of T left */
    th_proxy_blackhole(px, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a.rc != DLOCK_EUNKNOWN || b.rc != DLOCK_OK)
        fail_msg("a: %d (%s), b: %d (%s)", a.rc, a.msg, b.rc, b.msg);
    assert_int_equal(b.count, 1);   /* b's own hold, answered to b */
    assert_int_equal(th_int(&srv, "HLEN %s", nb), 1);
    if (flush) {
        /* a's request was refused (NOSCRIPT): it never ran. */
        assert_int_equal(th_int(&srv, "EXISTS %s", na), 0);
    } else {
        /* Both ran once on Redis, each under its own thread's owner. */
        assert_int_equal(th_int(&srv, "HLEN %s", na), 1);
        redisReply *ra = th_cmd(&srv, "HKEYS %s", na), *rb = th_cmd(&srv, "HKEYS %s", nb);
        assert_string_not_equal(ra->element[0]->str, rb->element[0]->str);
        freeReplyObject(ra);
        freeReplyObject(rb);
    }
    freeReplyObject(th_cmd(&srv, "DEL %s %s", na, nb));
    dlock_lock_free(a.l);
    dlock_lock_free(b.l);
    dlock_client_close(c);
    th_proxy_stop(px);
}

static void test_timeout_keeps_the_others_replies(void **state)
{
    (void)state;
    timeout_keeps_the_others_replies(0);
}

static void test_timeout_then_noscript(void **state)
{
    (void)state;
    timeout_keeps_the_others_replies(1);
}

typedef struct cycler {
    dlock_lock *l;
    pthread_barrier_t *go;
    int rc;
    int64_t count;
} cycler;

static void *acquire_once(void *arg)
{
    cycler *y = arg;
    pthread_barrier_wait(y->go);
    y->rc = dlock_lock_acquire(y->l, 60000);
    if (y->rc == DLOCK_OK && dlock_lock_hold_count(y->l, &y->count) != DLOCK_OK)
        y->count = -2;
    if (y->rc == DLOCK_OK && dlock_lock_release(y->l) != DLOCK_OK)
        y->rc = -100;
    return NULL;
}

/* Redis lost its scripts (SCRIPT FLUSH) and N threads' EVALSHAs go out
 * together on the shared connection: each is refused with NOSCRIPT, the
 * script is loaded, each goes again and gets its own answer. */
static void test_noscript_inside_a_pipeline(void **state)
{
    (void)state;
    th_proxy *px;
    char names[N][128];
    dlock_lock *locks[N];
    dlock_client *c = locks_via(&px, 5000 * th_slack(), "noscript", names, locks);
    cycler ys[N];
    pthread_t th[N];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N);
    for (int i = 0; i < N; i++)
        ys[i] = (cycler){.l = locks[i], .go = &go};
    for (int round = 0; round < 5; round++) {
        freeReplyObject(th_cmd(&srv, "SCRIPT FLUSH"));
        for (int i = 0; i < N; i++) {
            ys[i].rc = -99;
            ys[i].count = -1;
            pthread_create(&th[i], NULL, acquire_once, &ys[i]);
        }
        for (int i = 0; i < N; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < N; i++) {
            assert_int_equal(ys[i].rc, DLOCK_OK);
            assert_int_equal(ys[i].count, 1);
            assert_int_equal(th_int(&srv, "EXISTS %s", names[i]), 0);
        }
    }
    for (int i = 0; i < N; i++)
        dlock_lock_free(ys[i].l);
    pthread_barrier_destroy(&go);
    dlock_client_close(c);
    th_proxy_stop(px);
}

typedef struct looper {
    dlock_lock *l;
    pthread_barrier_t *go;
    const int *stop;         /* read with __atomic: the main thread sets it */
    int cycles;              /* acquire + hold count + release, all DLOCK_OK */
    int rc;                  /* the first other outcome (-99: none) */
    int step;                /* ... and where: 0 acquire, 1 hold count, 2 release */
} looper;

static void *cycle_until(void *arg)
{
    looper *y = arg;
    pthread_barrier_wait(y->go);
    while (!__atomic_load_n(y->stop, __ATOMIC_ACQUIRE)) {
        int64_t n = -1;
        int step = 0, rc = dlock_lock_acquire(y->l, 60000);
        if (rc == DLOCK_OK) {
            step = 1;
            rc = dlock_lock_hold_count(y->l, &n);
            if (rc == DLOCK_OK && n != 1)
                rc = -100;   /* not its own hold's count */
        }
        if (rc == DLOCK_OK) {
            step = 2;
            rc = dlock_lock_release(y->l);
        }
        if (rc != DLOCK_OK) {
            y->rc = rc;
            y->step = step;
            return NULL;
        }
        y->cycles++;
    }
    return NULL;
}

/* N threads cycling on names of their own share the connection: a request
 * may be left in the buffer for a caller just answered to write with its
 * own (net/mux.c). Nothing is held back until its timeout (the connection
 * is never given up), every call answers DLOCK_OK; then the connection
 * drops under them: each thread's call in flight ends DLOCK_OK or, for an
 * acquire or release that may have run, DLOCK_EUNKNOWN, none hangs, and
 * the client goes on. */
static void threads_cycling(int cut)
{
    th_proxy *px;
    char names[N][128];
    dlock_lock *locks[N];
    dlock_client *c = locks_via(&px, 2000 * th_slack(), "cycle", names, locks);
    looper ys[N];
    pthread_t th[N];
    pthread_barrier_t go;
    int stop = 0;
    pthread_barrier_init(&go, NULL, N + 1);
    for (int i = 0; i < N; i++) {
        ys[i] = (looper){.l = locks[i], .go = &go, .stop = &stop, .rc = -99, .step = -1};
        pthread_create(&th[i], NULL, cycle_until, &ys[i]);
    }
    pthread_barrier_wait(&go);
    th_sleep_ms(1500);
    if (cut)
        th_proxy_cut(px);
    th_sleep_ms(cut ? 300 : 0);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    dlock_stats st;
    assert_int_equal(dlock_client_stats(c, &st, sizeof(st)), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        if (!cut || ys[i].rc == -99) {
            if (ys[i].rc != -99 || ys[i].cycles < 1)
                fail_msg("thread %d: %d cycles, then %d at step %d (%s)", i, ys[i].cycles,
                         ys[i].rc, ys[i].step, dlock_last_error());
            continue;
        }
        /* Only a request that may have run ends unknown; a query is resent. */
        if (ys[i].rc != DLOCK_EUNKNOWN || ys[i].step == 1)
            fail_msg("thread %d after the drop: %d at step %d", i, ys[i].rc, ys[i].step);
    }
    if (!cut)
        assert_int_equal(st.reconnects, 0);   /* no request held back to its timeout */
    for (int i = 0; i < N; i++) {   /* the client goes on, on a new connection */
        freeReplyObject(th_cmd(&srv, "DEL %s", names[i]));
        assert_int_equal(dlock_lock_acquire(ys[i].l, 60000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(ys[i].l), DLOCK_OK);
        dlock_lock_free(ys[i].l);
    }
    pthread_barrier_destroy(&go);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* Its state: NULL, or a drop (the_drop) under the threads. */
static void test_threads_cycling(void **state) { threads_cycling(*state != NULL); }
static int the_drop = 1;

/* [2]: re-entry 1 with the watchdog. */
static unk_kind k_lock[3] = {
    {dlock_lock_get, 0, 60000}, {dlock_lock_get, 1, 60000}, {dlock_lock_get, 1, DLOCK_WATCHDOG}};
static unk_kind k_fair[3] = {{dlock_fair_lock_get, 0, 60000},
                             {dlock_fair_lock_get, 1, 60000},
                             {dlock_fair_lock_get, 1, DLOCK_WATCHDOG}};
static unk_kind k_write[2] = {{dlock_write_lock_get, 0, 60000}, {dlock_write_lock_get, 1, 60000}};
static unk_kind k_read[2] = {{dlock_read_lock_get, 0, 60000}, {dlock_read_lock_get, 1, 60000}};
/* test_unknown_ran_lock_0: the case's test, type and index (re-entries; 2:
 * the watchdog's). */
#define UNK(fn, type, re) {#fn "_" #type "_" #re, fn, NULL, NULL, &k_##type[re]}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop_with_requests_in_flight),
        UNK(test_unknown_ran, lock, 0),
        UNK(test_unknown_ran, fair, 0),
        UNK(test_unknown_ran, lock, 1),
        UNK(test_unknown_ran, fair, 1),
        UNK(test_unknown_ran, lock, 2),
        UNK(test_unknown_ran, fair, 2),
        UNK(test_unknown_ran, write, 1),
        UNK(test_unknown_ran, read, 1),
        UNK(test_unknown_not_run, lock, 0),
        UNK(test_unknown_not_run, fair, 0),
        UNK(test_unknown_ran_async, lock, 0),
        UNK(test_unknown_ran_async, fair, 0),
        UNK(test_known_then_unknown_ran, lock, 0),
        UNK(test_known_then_unknown_ran, fair, 0),
        UNK(test_known_then_unknown_ran, write, 0),
        UNK(test_known_then_unknown_ran, read, 0),
        UNK(test_known_then_unknown_not_run, lock, 0),
        UNK(test_known_then_unknown_not_run, fair, 0),
        UNK(test_known_then_unknown_not_run, write, 0),
        UNK(test_known_then_unknown_not_run, read, 0),
        cmocka_unit_test(test_known_then_unknown_delay_handle),
        cmocka_unit_test(test_timeout_keeps_the_others_replies),
        cmocka_unit_test(test_timeout_then_noscript),
        cmocka_unit_test(test_noscript_inside_a_pipeline),
        cmocka_unit_test(test_threads_cycling),
        {"test_threads_cycling_then_drop", test_threads_cycling, NULL, NULL, &the_drop},
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
