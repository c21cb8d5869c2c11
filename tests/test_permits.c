/* The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore):
 * Redisson's scenarios, ids and the layout Redisson reads, leases that end
 * by themselves and wake waiters, lease updates, watchdog permits (renewed,
 * reported lost, back in the pool when their holder dies), interop both ways
 * with the Redisson side played by plain Redis commands, and bad input. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "proxy.h"
#include "sync/sync.h"

static dlock_client *quick;  /* watchdog WD ms */
/* Short enough for quick tests, long enough that a starved machine (two
 * noisy cores) still renews in time. */
static int64_t WD;

typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    char name[256];
    char owner[64];
    dlock_lost_reason reason;
} lost_log;

static lost_log lost = {PTHREAD_MUTEX_INITIALIZER, 0, "", "", 0};

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->owner, sizeof(g->owner), "%s", owner);
    g->reason = reason;
    pthread_mutex_unlock(&g->mu);
}

static int lost_calls(void)
{
    pthread_mutex_lock(&lost.mu);
    int n = lost.calls;
    pthread_mutex_unlock(&lost.mu);
    return n;
}

static int setup(void **state)
{
    if (th_setup(state) != 0)
        return -1;
    WD = 1500 * th_slack();
    quick = th_client(&srv, WD);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(quick);
    return th_teardown(state);
}

/* ------------------------------------------------------------- helpers */

static dlock_permit_semaphore *psem(dlock_client *c, const char *prefix, char *name, size_t size)
{
    th_name(name, size, prefix);
    dlock_permit_semaphore *p = NULL;
    assert_int_equal(dlock_permit_semaphore_get(c, name, &p), DLOCK_OK);
    return p;
}

static int64_t avail(dlock_permit_semaphore *p, int64_t *held)
{
    int64_t n = -999;
    assert_int_equal(dlock_permit_semaphore_available(p, &n, held), DLOCK_OK);
    return n;
}

static void to_raw(const char *hex, unsigned char raw[16])
{
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        raw[i] = (unsigned char)v;
    }
}

/* The lease of permit `id` as Redis holds it: the score, -1 when absent. */
static long long score_of(const char *name, const char *id)
{
    unsigned char raw[16];
    to_raw(id, raw);
    redisReply *r = th_cmd(&srv, "ZSCORE {%s}:timeout %b", name, raw, (size_t)16);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

static long long server_ms(void)
{
    redisReply *r = th_cmd(&srv, "TIME");
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

static long long numsub(const char *channel)
{
    return th_numsub(&srv, channel);
}

static int await_numsub(const char *channel, long long n, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (numsub(channel) != n && th_now_ms() < end)
        th_sleep_ms(5);
    return numsub(channel) == n;
}

static int is_hex32(const char *id)
{
    if (strlen(id) != 32)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return 1;
}

/* A thread taking a permit with a wait and a lease. */
typedef struct pwaiter {
    dlock_permit_semaphore *p;
    int64_t wait_ms, lease_ms;
    dlock_cancel *cancel;
    int rc;
    int64_t done_at;
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    pthread_t t;
} pwaiter;

static void *pwaiter_main(void *arg)
{
    pwaiter *w = arg;
    w->rc = dlock_permit_semaphore_acquire_opts(
        w->p,
        &(dlock_wait_opts){.wait_ms = w->wait_ms, .lease_ms = w->lease_ms, .cancel = w->cancel},
        w->id, sizeof(w->id));
    w->done_at = th_now_ms();
    return NULL;
}

static void start_pwaiter(pwaiter *w, dlock_permit_semaphore *p, int64_t wait_ms,
                          int64_t lease_ms, dlock_cancel *cancel)
{
    memset(w, 0, sizeof(*w));
    w->p = p;
    w->wait_ms = wait_ms;
    w->lease_ms = lease_ms;
    w->cancel = cancel;
    pthread_create(&w->t, NULL, pwaiter_main, w);
}

/* ------------------------------------------------------------- layout */

/* An id is Redisson's form (32 lowercase hex); Redis keeps its 16 bytes in
 * {name}:timeout with the lease's end as the score. */
static void test_id_and_layout(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE], id2[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-layout", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 2, NULL), DLOCK_OK);
    long long t0 = server_ms();
    assert_int_equal(dlock_permit_semaphore_acquire(p, 10000, id, sizeof(id)), DLOCK_OK);
    assert_true(is_hex32(id));
    long long sc = score_of(name, id);
    assert_true(sc >= t0 + 10000 && sc < t0 + 10000 + 2000 * th_slack());
    assert_int_equal(th_int(&srv, "ZCARD {%s}:timeout", name), 1);
    int64_t held = -1;
    assert_int_equal(avail(p, &held), 1);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_permit_semaphore_try(p, 0, 10000, id2, sizeof(id2)), DLOCK_OK);
    assert_string_not_equal(id, id2);
    assert_int_equal(avail(p, &held), 0);
    assert_int_equal(held, 2);
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    assert_int_equal(score_of(name, id), -1);
    /* upper case is the same id */
    for (char *c = id2; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    assert_int_equal(dlock_permit_semaphore_release(p, id2), DLOCK_OK);
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 0);
    dlock_permit_semaphore_free(p);
}

/* A name with its own hash tag keeps it: name:timeout. */
static void test_tagged_name(void **state)
{
    (void)state;
    char base[128], name[160], id[DLOCK_PERMIT_ID_BUFSIZE];
    th_name(base, sizeof(base), "perm-tag");
    snprintf(name, sizeof(name), "{%s}:pool", base);
    dlock_permit_semaphore *p;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 1), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 5000, id, sizeof(id)), DLOCK_OK);
    assert_int_equal(th_int(&srv, "ZCARD %s:timeout", name), 1);
    assert_int_equal(th_int(&srv, "EXISTS {%s}:timeout", name), 0);
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------- Redisson's scenarios */

static void test_set_permits(void **state)
{
    (void)state;
    char name[128], ids[3][DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-set", name, sizeof(name));
    int64_t held = -1;
    int set = -1;
    assert_int_equal(avail(p, &held), 0);   /* testNotExistent */
    assert_int_equal(dlock_permit_semaphore_set_total(p, 10), DLOCK_OK);
    assert_int_equal(avail(p, &held), 10);
    assert_int_equal(held, 0);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 15, &set), DLOCK_OK);
    assert_int_equal(set, 0);
    assert_int_equal(avail(p, NULL), 10);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 15), DLOCK_OK);
    assert_int_equal(avail(p, NULL), 15);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 15), DLOCK_OK);
    assert_int_equal(avail(p, NULL), 15);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 5), DLOCK_OK);
    assert_int_equal(avail(p, NULL), 5);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_permit_semaphore_try(p, 200, 10000, ids[i], sizeof(ids[i])),
                         DLOCK_OK);
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 3);
    /* the total down to what is held, then below it */
    assert_int_equal(dlock_permit_semaphore_set_total(p, 3), DLOCK_OK);
    assert_int_equal(avail(p, &held), 0);
    assert_int_equal(held, 3);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 2), DLOCK_OK);
    assert_int_equal(avail(p, &held), -1);
    assert_int_equal(held, 3);
    dlock_permit_semaphore_free(p);
}

static void test_add_permits(void **state)
{
    (void)state;
    char name[128];
    dlock_permit_semaphore *p = psem(cli, "perm-add", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 10, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_add_permits(p, 5), DLOCK_OK);
    assert_int_equal(avail(p, NULL), 15);
    assert_int_equal(dlock_permit_semaphore_add_permits(p, -10), DLOCK_OK);
    assert_int_equal(avail(p, NULL), 5);
    assert_int_equal(dlock_permit_semaphore_add_permits(p, -10), DLOCK_OK);
    assert_int_equal(avail(p, NULL), -5);
    dlock_permit_semaphore_free(p);
}

/* testAvailablePermits / testAcquiredPermits: leases end by themselves. */
static void test_leases_end(void **state)
{
    (void)state;
    char name[128], a[DLOCK_PERMIT_ID_BUFSIZE], b[DLOCK_PERMIT_ID_BUFSIZE],
        c[DLOCK_PERMIT_ID_BUFSIZE];
    const int64_t L = 600 * th_slack();
    dlock_permit_semaphore *p = psem(cli, "perm-end", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 2, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p, 200, L, a, sizeof(a)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p, 200, L, b, sizeof(b)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p, 0, L, c, sizeof(c)), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "earliest lease ends in"));
    int64_t held;
    assert_int_equal(avail(p, &held), 0);
    assert_int_equal(held, 2);
    th_sleep_ms(L + 100);
    assert_int_equal(dlock_permit_semaphore_try(p, 200, L, c, sizeof(c)), DLOCK_OK);
    assert_int_equal(avail(p, &held), 1);
    assert_int_equal(held, 1);
    th_sleep_ms(L + 100);
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 0);
    dlock_permit_semaphore_free(p);
}

/* testExpire: a waiter gets the permit when the holder's lease ends, with
 * no release: it slept until the lease's end, retried once, and took it. */
static void test_expiry_wakes_waiter(void **state)
{
    (void)state;
    char name[128], first[DLOCK_PERMIT_ID_BUFSIZE];
    const int64_t L = 800 * th_slack();
    dlock_permit_semaphore *p = psem(cli, "perm-expire", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_acquire(p, L, first, sizeof(first)), DLOCK_OK);
    long long e0 = th_calls(&srv, "evalsha");
    pwaiter w;
    start_pwaiter(&w, p, L + 5000 * th_slack(), 10000, NULL);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    int64_t took = w.done_at - t0;
    assert_true(took >= L - 50);
    assert_true(took < L + 500 * th_slack());
    /* first try, the retry once subscribed, the one at the lease's end */
    assert_int_equal(th_calls(&srv, "evalsha") - e0, 3);
    int released = -1;
    assert_int_equal(dlock_permit_semaphore_try_release(p, first, &released), DLOCK_OK);
    assert_int_equal(released, 0);
    assert_int_equal(dlock_permit_semaphore_release(p, w.id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* DLOCK_NO_EXPIRY (Redisson's leaseTime -1): the permit is stored with
 * Redisson's score, its lease time reads -1, nothing renews it, it outlives
 * its client, and a waiter behind it waits for the release (no lease end to
 * sleep to); single and n-permit forms, blocking and async; every other
 * lease call refuses it. */
static void on_acq(const dlock_async_result *res, void *ud)
{
    pwaiter *w = ud;
    snprintf(w->id, sizeof(w->id), "%s", dlock_async_permit_id(res));
    w->done_at = th_now_ms();
    __atomic_store_n(&w->rc, dlock_async_status(res), __ATOMIC_RELEASE);
}

static void test_no_expiry(void **state)
{
    (void)state;
    char name[128], leases[200], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_client *other = th_client(&srv, 300);   /* a short watchdog, were it renewed */
    dlock_permit_semaphore *p = psem(cli, "perm-noexp", name, sizeof(name)), *q;
    snprintf(leases, sizeof(leases), "{%s}:timeout", name);
    assert_int_equal(dlock_permit_semaphore_get(other, name, &q), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 3, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(q, DLOCK_NO_EXPIRY, id, sizeof(id)), DLOCK_OK);
    redisReply *r = th_cmd(&srv, "ZRANGE %s 0 -1 WITHSCORES", leases);
    assert_int_equal(r->elements, 2);
    assert_string_equal(r->element[1]->str, "922337203685477");
    freeReplyObject(r);
    int64_t ms = 0;
    assert_int_equal(dlock_permit_semaphore_lease_time(p, id, &ms), DLOCK_OK);
    assert_int_equal(ms, -1);
    /* its client goes: the permit stays taken (never renewed, never expires) */
    dlock_permit_semaphore_free(q);
    dlock_client_close(other);
    th_sleep_ms(700);
    int64_t held = 0;
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 1);
    /* n at once, and the async form */
    char ids[1][DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_acquire_n(p, 1, DLOCK_NO_EXPIRY, ids), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, ids[0], &ms), DLOCK_OK);
    assert_int_equal(ms, -1);
    pwaiter a = {.rc = 1};
    assert_int_equal(dlock_permit_semaphore_acquire_async(
                         p, &(dlock_wait_opts){.lease_ms = DLOCK_NO_EXPIRY}, on_acq, &a),
                     DLOCK_OK);
    int64_t until = th_now_ms() + 5000 * th_slack();
    while (__atomic_load_n(&a.rc, __ATOMIC_ACQUIRE) == 1 && th_now_ms() < until)
        th_sleep_ms(5);
    assert_int_equal(a.rc, DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, a.id, &ms), DLOCK_OK);
    assert_int_equal(ms, -1);
    assert_int_equal(avail(p, &held), 0);
    /* a waiter behind permits that never expire sleeps until a release */
    long long e0 = th_calls(&srv, "evalsha");
    pwaiter w;
    start_pwaiter(&w, p, 10000 * th_slack(), 60000, NULL);
    th_sleep_ms(600);
    assert_int_equal(w.done_at, 0);
    assert_true(th_calls(&srv, "evalsha") - e0 <= 2);   /* first try, the retry once subscribed */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.done_at - t0 < 1000 * th_slack());
    /* bad input: other negative leases, and the calls that take no such lease */
    char x[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_try(p, 0, -2, x, sizeof(x)), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease_ms -2"));
    assert_int_equal(dlock_permit_semaphore_try(p, 0, -1, x, sizeof(x)), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, a.id, DLOCK_NO_EXPIRY), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_lease_time(p, a.id, &ms), DLOCK_OK);
    assert_int_equal(ms, -1);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, DLOCK_NO_EXPIRY), DLOCK_EINVAL);
    dlock_lock_free(l);
    assert_int_equal(dlock_permit_semaphore_release(p, ids[0]), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(p, a.id), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(p, w.id), DLOCK_OK);
    assert_int_equal(avail(p, &held), 3);
    assert_int_equal(held, 0);
    dlock_permit_semaphore_free(p);
}

/* testReleaseExpired, and an id nobody holds: clear errors, nothing given
 * twice. */
static void test_release_expired_or_unknown(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-relexp", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(p, 100, 100, id, sizeof(id)), DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "had expired"));
    assert_int_equal(avail(p, NULL), 1);   /* back once, by expiry */
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "unknown"));
    int released = -1;
    assert_int_equal(dlock_permit_semaphore_try_release(p, "0123456789abcdef0123456789abcdef",
                                                        &released),
                     DLOCK_OK);
    assert_int_equal(released, 0);
    assert_int_equal(avail(p, NULL), 1);
    dlock_permit_semaphore_free(p);
}

/* testUpdateLeaseTime */
static void test_update_lease(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE], id2[DLOCK_PERMIT_ID_BUFSIZE];
    const int64_t S = 500 * th_slack();
    dlock_permit_semaphore *p = psem(cli, "perm-update", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, "0123456789abcdef0123456789abcdef",
                                                         1000),
                     DLOCK_ENOTOWNER);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 60000, id, sizeof(id)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id, S), DLOCK_OK);
    th_sleep_ms(S + 200);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id, S), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_permit_semaphore_try(p, S, S, id2, sizeof(id2)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id2, 3 * S), DLOCK_OK);
    th_sleep_ms(2 * S);
    assert_int_equal(avail(p, NULL), 0);
    th_sleep_ms(S + 200);
    assert_int_equal(avail(p, NULL), 1);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id2, S), DLOCK_ENOTOWNER);
    dlock_permit_semaphore_free(p);
}

/* testBlockingAcquire: a release wakes the waiter, which sent nothing while
 * it slept (the only lease has no end it must wake for before then). */
static void test_release_wakes_waiter(void **state)
{
    (void)state;
    char name[128], ch[160], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-wake", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 60000, id, sizeof(id)), DLOCK_OK);
    pwaiter w;
    start_pwaiter(&w, p, DLOCK_WAIT_FOREVER, 60000, NULL);
    assert_true(await_numsub(ch, 1, 5000));
    if (!th_deployed(&srv)) {   /* replicas and sentinels talk to a deployment's nodes */
        long long c0 = th_calls_settled(&srv, 3000);
        th_sleep_ms(600);
        assert_int_equal(th_calls(&srv, NULL) - c0, 0);
    }
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.done_at - t0 < 500 * th_slack());
    assert_int_equal(avail(p, NULL), 0);
    assert_int_equal(dlock_permit_semaphore_release(p, w.id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

static void test_cancel(void **state)
{
    (void)state;
    char name[128], ch[160], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-cancel", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 60000, id, sizeof(id)), DLOCK_OK);
    dlock_cancel *tok;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    pwaiter w;
    start_pwaiter(&w, p, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, tok);
    assert_true(await_numsub(ch, 1, 5000));
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.done_at - t0 < 500 * th_slack());
    int64_t held;
    assert_int_equal(avail(p, &held), 0);
    assert_int_equal(held, 1);
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);
    dlock_cancel_free(tok);
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------------ watchdog permits */

/* A watchdog permit outlives many watchdog timeouts while its holder lives,
 * and stops being renewed once released. */
static void test_watchdog_permit_lives(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(quick, "perm-wd", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(quick->wd), 1);
    long long s0 = score_of(name, id);
    th_sleep_ms(3 * WD);
    int64_t held;
    assert_int_equal(avail(p, &held), 0);
    assert_int_equal(held, 1);
    long long s1 = score_of(name, id);
    assert_true(s1 > s0 + 2 * WD - 2 * WD / 3);   /* renewed meanwhile */
    assert_true(s1 > server_ms());
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(quick->wd), 0);
    assert_int_equal(avail(p, &held), 1);
    dlock_permit_semaphore_free(p);
}

/* The holder process dies (kill -9): its watchdog permit is back in the pool
 * within the watchdog timeout, and the waiter that wanted it gets it. */
static void test_watchdog_permit_holder_dies(void **state)
{
    (void)state;
    char name[128], line[128];
    dlock_permit_semaphore *p = psem(cli, "perm-dies", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    int fd;
    char wd[24];
    snprintf(wd, sizeof(wd), "%lld", (long long)WD);
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "permit-hold", srv.url, name, wd, NULL);
    assert_true(pid > 0);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_int_equal(strncmp(line, "held ", 5), 0);
    assert_true(is_hex32(line + 5));
    th_sleep_ms(WD + WD / 2);   /* renewed past its first lease */
    assert_int_equal(avail(p, NULL), 0);
    pwaiter w;
    start_pwaiter(&w, p, 2 * WD + 5000 * th_slack(), 60000, NULL);
    th_sleep_ms(200);
    int64_t killed = th_now_ms();
    kill(pid, SIGKILL);
    th_wait(pid, 5000);
    close(fd);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    int64_t after = w.done_at - killed;
    if (after > WD + 500 * th_slack())
        fail_msg("the dead holder's permit came back %lld ms after the kill (timeout %lld ms)",
                 (long long)after, (long long)WD);
    assert_int_equal(dlock_permit_semaphore_release(p, w.id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* A watchdog permit taken away (another client released it by its id) is
 * reported lost once, with the semaphore's name and the permit's id; the
 * holder's release then says it does not hold it. */
static void test_watchdog_permit_lost(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(quick, "perm-lost", name, sizeof(name));
    dlock_permit_semaphore_set_lost_callback(p, on_lost, &lost);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_OK);
    int before = lost_calls();
    dlock_permit_semaphore *other;
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &other), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(other, id), DLOCK_OK);
    int64_t end = th_now_ms() + 3 * WD * th_slack();
    while (lost_calls() == before && th_now_ms() < end)
        th_sleep_ms(10);
    assert_int_equal(lost_calls(), before + 1);
    pthread_mutex_lock(&lost.mu);
    assert_string_equal(lost.name, name);
    assert_string_equal(lost.owner, id);
    assert_int_equal(lost.reason, DLOCK_LOST_GONE);
    pthread_mutex_unlock(&lost.mu);
    assert_int_equal(dlock__watchdog_count(quick->wd), 0);
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_ENOTOWNER);
    th_sleep_ms(WD);
    assert_int_equal(lost_calls(), before + 1);
    assert_int_equal(avail(p, NULL), 1);
    dlock_permit_semaphore_free(other);
    dlock_permit_semaphore_free(p);
}

/* A release that gets no answer ends the watchdog's renewal of that permit
 * anyway, and is no loss: whether the request never reached Redis (the permit
 * then runs out with its last lease and is back in the pool) or it ran and
 * only the answer was lost (back at once). Renewing on would keep a permit
 * its holder let go of out of the pool for as long as the holder lives. */
static void test_unanswered_release_stops_renewal(void **state)
{
    (void)state;
    th_proxy *px = th_proxy_start(srv.port);
    assert_non_null(px);
    char url[64], name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(px));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, 300), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 1, 100), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_permit_semaphore *p = psem(c, "perm-relfail", name, sizeof(name));
    dlock_permit_semaphore_set_lost_callback(p, on_lost, &lost);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    int before = lost_calls();

    /* The request never arrives (a partition). */
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_OK);
    th_sleep_ms(WD / 2);
    th_proxy_blackhole(px, 1);
    int rc = dlock_permit_semaphore_release(p, id);
    assert_true(rc == DLOCK_ECMDTIMEOUT || rc == DLOCK_ECONN || rc == DLOCK_EUNKNOWN);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    th_proxy_blackhole(px, 0);
    th_proxy_cut(px);
    assert_true(score_of(name, id) > 0);   /* still leased: the release never ran */
    int64_t end = th_now_ms() + 2 * WD * th_slack();
    while (score_of(name, id) > server_ms() && th_now_ms() < end)
        th_sleep_ms(20);
    assert_true(score_of(name, id) <= server_ms());   /* ran out, not renewed */
    assert_int_equal(avail(p, NULL), 1);              /* back in the pool */

    /* The request runs and only its answer is lost. */
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_OK);
    th_proxy_swallow_replies(px);
    rc = dlock_permit_semaphore_release(p, id);
    assert_true(rc == DLOCK_ECMDTIMEOUT || rc == DLOCK_ECONN || rc == DLOCK_EUNKNOWN);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    assert_int_equal(score_of(name, id), -1);   /* released in Redis */
    assert_int_equal(avail(p, NULL), 1);
    th_sleep_ms(WD);                            /* no renewal found it gone */
    assert_int_equal(lost_calls(), before);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);

    dlock_permit_semaphore_free(p);
    dlock_client_close(c);
    th_proxy_stop(px);
}

/* A leased permit turned into a watchdog permit lives on; turned back into a
 * leased one, it ends with that lease. */
static void test_update_to_watchdog_and_back(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(quick, "perm-upwd", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 5000 * th_slack(), id, sizeof(id)),
                     DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(quick->wd), 1);
    th_sleep_ms(3 * WD);
    assert_int_equal(avail(p, NULL), 0);
    assert_int_equal(dlock_permit_semaphore_update_lease(p, id, 300), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(quick->wd), 0);
    th_sleep_ms(WD + 300);   /* past the lease, and past a renewal in flight */
    assert_int_equal(avail(p, NULL), 1);
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------------------ interop */

/* Redisson's side played with Redis commands. Its acquire (DECR the count,
 * ZADD the id's 16 bytes with the lease's end) shows in dlock's counts, and
 * dlock releases that permit by Redisson's hex id; its release (ZREM, INCR,
 * PUBLISH the new count) wakes dlock's waiter; a Redisson permit without a
 * lease (score 922337203685477) has no end a waiter sleeps for: the waiter
 * sends nothing until a message. */
static void test_interop_redisson_side(void **state)
{
    (void)state;
    char name[128], ch[160];
    const char *rid = "00112233445566778899aabbccddeeff";
    unsigned char raw[16];
    to_raw(rid, raw);
    dlock_permit_semaphore *p = psem(cli, "perm-interop", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    freeReplyObject(th_cmd(&srv, "SET %s 2", name));   /* trySetPermits(2) */
    /* Redisson's acquire(leaseTime 60 s) */
    assert_int_equal(th_int(&srv, "DECR %s", name), 1);
    freeReplyObject(th_cmd(&srv, "ZADD {%s}:timeout %lld %b", name, server_ms() + 60000, raw,
                           (size_t)16));
    int64_t held;
    assert_int_equal(avail(p, &held), 1);
    assert_int_equal(held, 1);
    assert_int_equal(dlock_permit_semaphore_release(p, rid), DLOCK_OK);
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 0);

    /* Redisson's acquire() of both, one without a lease */
    freeReplyObject(th_cmd(&srv, "SET %s 0", name));
    freeReplyObject(th_cmd(&srv, "ZADD {%s}:timeout 922337203685477 %b", name, raw, (size_t)16));
    pwaiter w;
    start_pwaiter(&w, p, DLOCK_WAIT_FOREVER, 60000, NULL);
    assert_true(await_numsub(ch, 1, 5000));
    if (!th_deployed(&srv)) {   /* replicas and sentinels talk to a deployment's nodes */
        long long c0 = th_calls_settled(&srv, 3000);
        th_sleep_ms(500);
        assert_int_equal(th_calls(&srv, NULL) - c0, 0);
    }
    /* Redisson's release of it */
    assert_int_equal(th_int(&srv, "ZREM {%s}:timeout %b", name, raw, (size_t)16), 1);
    assert_int_equal(th_int(&srv, "INCR %s", name), 1);
    assert_true(th_publish(&srv, ch, "1") >= 0);
    pthread_join(w.t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(p, w.id), DLOCK_OK);
    dlock_permit_semaphore_free(p);
}

/* dlock's release reaches Redisson's waiters: the new count on the channel. */
static void test_interop_dlock_wakes_redisson(void **state)
{
    (void)state;
    char name[128], ch[160], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-interop2", name, sizeof(name));
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 1, NULL), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 60000, id, sizeof(id)), DLOCK_OK);
    redisContext *sub = th_subscribe(&srv, ch);
    assert_non_null(sub);
    redisReply *r;
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "1");
    freeReplyObject(r);
    redisFree(sub);
    dlock_permit_semaphore_free(p);
}

/* ------------------------------------------------------------ bad input */

static void test_bad_input(void **state)
{
    (void)state;
    char name[128], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_permit_semaphore *p = psem(cli, "perm-bad", name, sizeof(name));
    assert_int_equal(dlock_permit_semaphore_set_total(p, 2), DLOCK_OK);
    /* -1 was DLOCK_WATCHDOG before 0.2.0 */
    const int64_t bad_lease[] = {-1, -2, ((int64_t)1 << 50) + 1};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(dlock_permit_semaphore_acquire(p, bad_lease[i], id, sizeof(id)),
                         DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "lease"));
    }
    assert_int_equal(dlock_permit_semaphore_acquire(p, 1000, id, 32), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire(p, 1000, NULL, 64), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_try(p, -2, 1000, id, sizeof(id)), DLOCK_EINVAL);
    const char *bad_ids[] = {NULL, "", "0123", "0123456789abcdef0123456789abcdeg",
                             "0123456789abcdef0123456789abcdef0", "not a permit id at all!!!!!!!!!!"};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        int rel = -1;
        assert_int_equal(dlock_permit_semaphore_release(p, bad_ids[i]), DLOCK_EINVAL);
        assert_int_equal(dlock_permit_semaphore_try_release(p, bad_ids[i], &rel), DLOCK_EINVAL);
        assert_int_equal(rel, -1);
        assert_int_equal(dlock_permit_semaphore_update_lease(p, bad_ids[i], 1000), DLOCK_EINVAL);
    }
    assert_int_equal(dlock_permit_semaphore_set_total(p, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(p, DLOCK_COUNT_MAX + 1, NULL),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_add_permits(p, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_add_permits(p, DLOCK_COUNT_MAX), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_available(p, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_permit_semaphore_acquire(NULL, 1000, id, sizeof(id)), DLOCK_EINVAL);
    int64_t held;
    assert_int_equal(avail(p, &held), 2);
    assert_int_equal(held, 0);
    dlock_permit_semaphore_free(NULL);
    dlock_permit_semaphore_free(p);
}

/* Keys of other types: the count as a hash, the leases as a string. */
static void test_wrong_type(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        char name[128], leases[160], id[DLOCK_PERMIT_ID_BUFSIZE];
        dlock_permit_semaphore *p = psem(cli, "perm-wrong", name, sizeof(name));
        snprintf(leases, sizeof(leases), "{%s}:timeout", name);
        if (k == 0) {
            freeReplyObject(th_cmd(&srv, "HSET %s f v", name));
        } else {
            freeReplyObject(th_cmd(&srv, "SET %s 3", name));
            freeReplyObject(th_cmd(&srv, "SET %s data", leases));
        }
        redisReply *b1 = th_cmd(&srv, "DUMP %s", name), *b2 = th_cmd(&srv, "DUMP %s", leases);
        const char *any = "0123456789abcdef0123456789abcdef";
        int64_t n;
        assert_int_equal(dlock_permit_semaphore_acquire(p, 1000, id, sizeof(id)),
                         DLOCK_EWRONGTYPE);
        assert_non_null(strstr(dlock_last_error(), "is not a permit-expirable semaphore"));
        assert_int_equal(dlock_permit_semaphore_release(p, any), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_permit_semaphore_update_lease(p, any, 1000), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_permit_semaphore_available(p, &n, NULL), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_permit_semaphore_set_total(p, 4), DLOCK_EWRONGTYPE);
        assert_int_equal(dlock_permit_semaphore_try_set_permits(p, 4, NULL), DLOCK_EWRONGTYPE);
        if (k == 0)
            assert_int_equal(dlock_permit_semaphore_add_permits(p, 1), DLOCK_EWRONGTYPE);
        redisReply *a1 = th_cmd(&srv, "DUMP %s", name), *a2 = th_cmd(&srv, "DUMP %s", leases);
        assert_int_equal(b1->len, a1->len);
        assert_memory_equal(b1->str, a1->str, b1->len);
        assert_int_equal(b2->type, a2->type);
        if (b2->type == REDIS_REPLY_STRING) {
            assert_int_equal(b2->len, a2->len);
            assert_memory_equal(b2->str, a2->str, b2->len);
        }
        freeReplyObject(b1);
        freeReplyObject(b2);
        freeReplyObject(a1);
        freeReplyObject(a2);
        dlock_permit_semaphore_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_and_layout),
        cmocka_unit_test(test_tagged_name),
        cmocka_unit_test(test_set_permits),
        cmocka_unit_test(test_add_permits),
        cmocka_unit_test(test_leases_end),
        cmocka_unit_test(test_expiry_wakes_waiter),
        cmocka_unit_test(test_release_expired_or_unknown),
        cmocka_unit_test(test_no_expiry),
        cmocka_unit_test(test_update_lease),
        cmocka_unit_test(test_release_wakes_waiter),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_watchdog_permit_lives),
        cmocka_unit_test(test_watchdog_permit_holder_dies),
        cmocka_unit_test(test_watchdog_permit_lost),
        cmocka_unit_test(test_unanswered_release_stops_renewal),
        cmocka_unit_test(test_update_to_watchdog_and_back),
        cmocka_unit_test(test_interop_redisson_side),
        cmocka_unit_test(test_interop_dlock_wakes_redisson),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrong_type),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
