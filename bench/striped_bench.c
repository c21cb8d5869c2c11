/* dlock_bench striped: a hot resource split into 16 stripes against the
 * same resource under one lock name. O.concurrency workers (16 by default)
 * each take the lock of a random key (0..999999), release it, and start
 * again; nothing is done inside. With one name every cycle waits for the
 * others; with 16 stripes two workers wait for each other only when their
 * keys fall in one stripe. Both are measured in the same process, in
 * alternating half-second rounds (O.seconds of each), so that the machine's
 * fast and slow moments fall on both sides of the ratio. A handle is made for
 * each cycle, as a service that locks per request would
 * (dlock_lock_get_striped / dlock_lock_get: no round trip). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

#define STRIPES 16
#define MAX_WORKERS 256

typedef struct worker {
    dlock_client *c;
    int striped;
    uint64_t rng;
    _Atomic long cycles;
} worker;

static atomic_int stop;

static uint64_t next_rand(uint64_t *s)   /* xorshift64 */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *work(void *arg)
{
    worker *w = arg;
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    while (!atomic_load(&stop)) {
        char key[24];
        snprintf(key, sizeof(key), "%llu", (unsigned long long)(next_rand(&w->rng) % 1000000));
        dlock_lock *l;
        int rc = w->striped ? dlock_lock_get_striped(w->c, "bench:striped", key, STRIPES, &l)
                            : dlock_lock_get(w->c, "bench:striped:one", &l);
        if (rc != DLOCK_OK)
            die("get");
        if (dlock_lock_acquire(l, lease) != DLOCK_OK || dlock_lock_release(l) != DLOCK_OK)
            die("cycle");
        dlock_lock_free(l);
        atomic_fetch_add(&w->cycles, 1);
    }
    return NULL;
}

/* Cycles per second of O.concurrency workers for run_ms, after warm_ms. */
static double rate(dlock_client *c, int striped, long warm_ms, long run_ms)
{
    static worker ws[MAX_WORKERS];
    pthread_t th[MAX_WORKERS];
    atomic_store(&stop, 0);
    for (long i = 0; i < O.concurrency; i++) {
        ws[i].c = c;
        ws[i].striped = striped;
        ws[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        atomic_store(&ws[i].cycles, 0);
        pthread_create(&th[i], NULL, work, &ws[i]);
    }
    usleep((useconds_t)warm_ms * 1000);
    long base = 0, total = 0;
    for (long i = 0; i < O.concurrency; i++)
        base += atomic_load(&ws[i].cycles);
    int64_t t0 = now_ns();
    usleep((useconds_t)run_ms * 1000);
    for (long i = 0; i < O.concurrency; i++)
        total += atomic_load(&ws[i].cycles);
    double secs = (double)(now_ns() - t0) / 1e9;
    atomic_store(&stop, 1);
    for (long i = 0; i < O.concurrency; i++)
        pthread_join(th[i], NULL);
    return (double)(total - base) / secs;
}

void striped(void)
{
    dlock_client *c = open_client(0, (int)O.concurrency + 2);
    rate(c, 1, 300, 200);   /* warm-up of both: connections, scripts, subscriptions */
    rate(c, 0, 300, 200);
    double one = 0, str = 0;
    long rounds = O.seconds * 2;
    for (long i = 0; i < rounds; i++) {
        str += rate(c, 1, 50, 500) / (double)rounds;
        one += rate(c, 0, 50, 500) / (double)rounds;
    }
    printf("{\"peer\":\"dlock\",\"scenario\":\"striped\",\"workers\":%ld,\"stripes\":%d,"
           "\"cycles_per_s\":%.0f,\"one_name_cycles_per_s\":%.0f,\"ratio\":%.2f,"
           "\"lease\":\"%s\"}\n",
           O.concurrency, STRIPES, str, one, one > 0 ? str / one : 0.0,
           O.lease ? "fixed" : "watchdog");
    dlock_client_close(c);
}
