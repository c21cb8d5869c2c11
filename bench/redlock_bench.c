/* A RedLock over three servers (one client each), uncontended.
 *
 *   dlock_bench redlock --url U1,U2,U3 [--cycles N] [--lease MS] [--kind blocking|async]
 *       acquire + release cycles of a RedLock of one name on each server:
 *       the blocking calls (dlock_multilock_acquire / _release), then the
 *       asynchronous ones (explicit owners; the caller waits for each
 *       callback), or only the --kind given, each timed on its own: p50 and
 *       p99 of the acquire and of the release, cycles/s, one JSON line each.
 *       The lease is --lease or the watchdog's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dlock/async.h"

#define NSRV 3

static int cmp_ns(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_us(int64_t *v, long n, double p)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_ns);
    long i = (long)(p * (double)(n - 1));
    return (double)v[i] / 1000.0;
}

/* The caller's wait for one callback. */
typedef struct waitcb {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status;
} waitcb;

static void on_done(const dlock_async_result *res, void *ud)
{
    waitcb *w = ud;
    pthread_mutex_lock(&w->mu);
    w->status = dlock_async_status(res);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int await_cb(waitcb *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    w->done = 0;
    int rc = w->status;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

typedef struct form {
    const char *name;
    int (*acquire)(dlock_multilock *ml, int64_t lease, waitcb *w);
    int (*release)(dlock_multilock *ml, waitcb *w);
} form;

static int b_acquire(dlock_multilock *ml, int64_t lease, waitcb *w)
{
    (void)w;
    return dlock_multilock_acquire(ml, lease);
}

static int b_release(dlock_multilock *ml, waitcb *w)
{
    (void)w;
    return dlock_multilock_release(ml);
}

static int a_acquire(dlock_multilock *ml, int64_t lease, waitcb *w)
{
    dlock_wait_opts o = {.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease};
    int rc = dlock_multilock_acquire_async(ml, &o, on_done, w);
    return rc != DLOCK_OK ? rc : await_cb(w);
}

static int a_release(dlock_multilock *ml, waitcb *w)
{
    int rc = dlock_multilock_release_async(ml, on_done, w);
    return rc != DLOCK_OK ? rc : await_cb(w);
}

static void run_form(const form *f, dlock_multilock *ml, int64_t lease)
{
    waitcb w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    for (int i = 0; i < 500; i++)   /* warm-up: connections, script caches */
        if (f->acquire(ml, lease, &w) != DLOCK_OK || f->release(ml, &w) != DLOCK_OK)
            die("warm-up");
    int64_t *acq = malloc(sizeof(int64_t) * (size_t)O.cycles);
    int64_t *rel = malloc(sizeof(int64_t) * (size_t)O.cycles);
    if (!acq || !rel)
        die("memory");
    int64_t t0 = now_ns();
    for (long i = 0; i < O.cycles; i++) {
        int64_t a = now_ns();
        if (f->acquire(ml, lease, &w) != DLOCK_OK)
            die("acquire");
        int64_t b = now_ns();
        if (f->release(ml, &w) != DLOCK_OK)
            die("release");
        acq[i] = b - a;
        rel[i] = now_ns() - b;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("{\"peer\":\"dlock\",\"scenario\":\"redlock3-%s\",\"servers\":%d,\"cycles\":%ld,"
           "\"seconds\":%.3f,\"cycles_per_s\":%.0f,\"acquire_p50_us\":%.1f,"
           "\"acquire_p99_us\":%.1f,\"release_p50_us\":%.1f,\"release_p99_us\":%.1f,"
           "\"lease\":\"%s\"}\n",
           f->name, NSRV, O.cycles, secs, O.cycles / secs, pct_us(acq, O.cycles, 0.50),
           pct_us(acq, O.cycles, 0.99), pct_us(rel, O.cycles, 0.50), pct_us(rel, O.cycles, 0.99),
           O.lease ? "fixed" : "watchdog");
    fflush(stdout);
    free(acq);
    free(rel);
}

void redlock(void)
{
    char urls[3 * 256], *save = NULL;
    snprintf(urls, sizeof(urls), "%s", O.url);
    const char *all = O.url;
    dlock_client *c[NSRV];
    dlock_lock *l[NSRV];
    char owner[DLOCK_OWNER_BUFSIZE];
    int k = 0;
    for (char *u = strtok_r(urls, ",", &save); u && k < NSRV; u = strtok_r(NULL, ",", &save)) {
        O.url = u;
        c[k] = open_client(0, 0);
        if (k == 0)
            dlock_client_new_owner_id(c[0], owner, sizeof(owner));
        /* An explicit owner: the asynchronous calls need one, and the
         * blocking ones then act for it too. */
        if (dlock_lock_get_as(c[k], "bench:redlock", owner, &l[k]) != DLOCK_OK)
            die("get");
        k++;
    }
    O.url = all;
    if (k != NSRV)
        die("redlock needs --url U1,U2,U3");
    dlock_multilock *ml;
    if (dlock_redlock_new(l, NSRV, &ml) != DLOCK_OK)
        die("redlock");
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    static const form forms[] = {{"blocking", b_acquire, b_release},
                                 {"async", a_acquire, a_release}};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
        if (strcmp(O.kind, "blocking") && strcmp(O.kind, "async") ? 1
                                                                  : !strcmp(O.kind, forms[i].name))
            run_form(&forms[i], ml, lease);
    dlock_multilock_free(ml);
    for (int i = 0; i < NSRV; i++) {
        dlock_lock_free(l[i]);
        dlock_client_close(c[i]);
    }
}
