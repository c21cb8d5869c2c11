/* Revocation on request: from a revoke request (dlock_lock_request_revoke,
 * on another client) to the holder's revoke handler, beside one round trip
 * (PING) measured in the same run: the floor.
 *
 *   dlock_bench revokereq --url U [--cycles 1000] [--tag -single|-cluster]
 *
 * One client holds the lock (an explicit-owner handle with a handler that
 * refuses: notes the time and returns); another asks --cycles times, one
 * request at a time, each only once the previous one was heard. Reported:
 * request -> callback p50 / p99 (the request's call begun -> the handler
 * running on the holder's io thread), the request's own round trip (its call
 * begun -> returned) and PING's, p50 / p99. On a cluster the lock's channel
 * is sharded in its slot (SPUBLISH), and PING goes to the seed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long heard;
static int64_t heard_at;

static void on_revoke(const char *name, const char *owner, const char *note, void *ud)
{
    (void)name;
    (void)owner;
    (void)note;
    (void)ud;
    int64_t t = now_ns();
    pthread_mutex_lock(&mu);
    heard++;
    heard_at = t;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

void revoke_request(void)
{
    long n = O.cycles > 0 ? O.cycles : 1000;
    dlock_client *hc = open_client(0, 0), *ac = open_client(0, 0);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *hl = NULL, *al = NULL;
    if (dlock_client_new_owner_id(hc, owner, sizeof(owner)) != DLOCK_OK ||
        dlock_lock_get_as(hc, "bench:revokereq", owner, &hl) != DLOCK_OK ||
        dlock_lock_get(ac, "bench:revokereq", &al) != DLOCK_OK ||
        dlock_lock_set_revoke_handler(hl, on_revoke, NULL) != DLOCK_OK ||
        dlock_lock_acquire(hl, DLOCK_WATCHDOG) != DLOCK_OK)
        die("holder");
    /* The handler's subscription is made: a request is heard. */
    for (int i = 0;; i++) {
        dlock_revoke_answer a;
        if (dlock_lock_request_revoke(al, NULL, &a) != DLOCK_OK)
            die("request");
        if (a.listeners > 0)
            break;
        if (i == 5000)
            die("no listener after 5 s");
        usleep(1000);
    }
    usleep(200 * 1000);   /* the warm-up's callbacks (the record read on subscribing) in */
    int64_t *cb = malloc((size_t)n * sizeof(*cb)), *rq = malloc((size_t)n * sizeof(*rq));
    if (!cb || !rq)
        die("memory");
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&mu);
        long before = heard;
        pthread_mutex_unlock(&mu);
        int64_t t0 = now_ns();
        dlock_revoke_answer a;
        if (dlock_lock_request_revoke(al, NULL, &a) != DLOCK_OK || a.listeners < 1)
            die("request");
        int64_t t1 = now_ns();
        pthread_mutex_lock(&mu);
        while (heard == before)
            pthread_cond_wait(&cv, &mu);
        cb[i] = heard_at - t0;
        pthread_mutex_unlock(&mu);
        rq[i] = t1 - t0;
    }
    redisContext *adm = admin();
    int64_t *rt = malloc((size_t)n * sizeof(*rt));
    ping_round_trips(adm, rt, n);
    qsort(cb, (size_t)n, sizeof(int64_t), cmp_i64);
    qsort(rq, (size_t)n, sizeof(int64_t), cmp_i64);
    printf("{\"peer\":\"dlock\",\"scenario\":\"revokereq%s\",\"cycles\":%ld,"
           "\"callback_p50_us\":%.1f,\"callback_p99_us\":%.1f,\"request_p50_us\":%.1f,"
           "\"request_p99_us\":%.1f,\"rtt_p50_us\":%.1f,\"rtt_p99_us\":%.1f}\n",
           O.tag, n, pct(cb, (size_t)n, 0.50), pct(cb, (size_t)n, 0.99), pct(rq, (size_t)n, 0.50),
           pct(rq, (size_t)n, 0.99), pct(rt, (size_t)n, 0.50), pct(rt, (size_t)n, 0.99));
    redisFree(adm);
    free(cb);
    free(rq);
    free(rt);
    dlock_lock_release(hl);
    dlock_lock_free(hl);
    dlock_lock_free(al);
    dlock_client_close(hc);
    dlock_client_close(ac);
}
