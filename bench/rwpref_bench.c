/* A read-write lock's writer beside a stream of readers, writer-first off
 * (Redisson's rules) and on (dlock_lock_set_writer_first).
 *
 *   dlock_bench writerfirst --url U [--workers 8] [--hold-ms 100] [--seconds 30]
 *       --workers reader threads (each its own owner, one client) take the
 *       read lock of one name, hold it --hold-ms, release it and take it
 *       again at once; their starts are staggered by hold / workers, so
 *       their holds overlap and the lock is never free of readers. A writer
 *       (another client) sleeps a random part of a hold, then waits for the
 *       write lock (no longer than what is left of --seconds), holds it
 *       10 ms and releases it, over and over for --seconds. Reported per
 *       mode: the writer's longest wait (when it never got in: the whole
 *       run, a lower bound), its p50 and its grants; the readers' longest
 *       hold (acquisition returned -> release returned), their grants and
 *       their longest wait; one round trip (PING, p50 and p99) beside. The
 *       target with the mode on: the longest wait <= the longest read hold +
 *       one round trip. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

#define WRITE_HOLD_MS 10

typedef struct reader {
    dlock_lock *l;
    atomic_int *stop;
    long hold_ms, delay_ms;
    long grants;
    int64_t longest_hold, longest_wait;   /* ns */
    pthread_t t;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    usleep((useconds_t)r->delay_ms * 1000);
    while (!atomic_load(r->stop)) {
        int64_t t0 = now_ns();
        if (dlock_lock_acquire(r->l, DLOCK_WATCHDOG) != DLOCK_OK)
            die("read acquire");
        int64_t t1 = now_ns();
        usleep((useconds_t)r->hold_ms * 1000);
        if (dlock_lock_release(r->l) != DLOCK_OK)
            die("read release");
        int64_t t2 = now_ns();
        r->grants++;
        if (t1 - t0 > r->longest_wait)
            r->longest_wait = t1 - t0;
        if (t2 - t1 > r->longest_hold)
            r->longest_hold = t2 - t1;
    }
    return NULL;
}

typedef struct mode_fig {
    double longest_ms, p50_ms, read_hold_ms, read_wait_ms;
    long grants, read_grants;
    int never;   /* the writer never got in: longest_ms is the whole run */
} mode_fig;

static void run_mode(int on, long nreaders, long hold_ms, long seconds, mode_fig *f)
{
    char name[64], owner[DLOCK_OWNER_BUFSIZE];
    snprintf(name, sizeof(name), "bench:writerfirst:%s", on ? "on" : "off");
    dlock_client *rc = open_client(0, 2), *wc = open_client(0, 0);
    reader *rs = calloc((size_t)nreaders, sizeof(*rs));
    atomic_int stop = 0;
    for (long i = 0; i < nreaders; i++) {
        dlock_client_new_owner_id(rc, owner, sizeof(owner));
        rs[i] = (reader){.stop = &stop, .hold_ms = hold_ms, .delay_ms = i * hold_ms / nreaders};
        if (dlock_read_lock_get_as(rc, name, owner, &rs[i].l) != DLOCK_OK ||
            dlock_lock_set_writer_first(rs[i].l, on) != DLOCK_OK)
            die("read lock");
        pthread_create(&rs[i].t, NULL, reader_main, &rs[i]);
    }
    dlock_lock *w = NULL;
    if (dlock_write_lock_get(wc, name, &w) != DLOCK_OK || dlock_lock_set_writer_first(w, on) != DLOCK_OK)
        die("write lock");
    usleep((useconds_t)hold_ms * 2000);   /* every reader in its stride */

    size_t cap = 4096, n = 0;
    int64_t *waits = malloc(cap * sizeof(int64_t));
    int64_t end = now_ns() + (int64_t)seconds * 1000000000;
    *f = (mode_fig){0};
    unsigned seed = 7;
    while (now_ns() < end) {
        usleep((useconds_t)(rand_r(&seed) % (unsigned)(hold_ms * 1000)));
        int64_t t0 = now_ns(), left_ms = (end - t0) / 1000000;
        if (left_ms < 1)
            break;
        int rc2 = dlock_lock_try(w, left_ms, DLOCK_WATCHDOG);
        int64_t waited = now_ns() - t0;
        if (rc2 == DLOCK_ETIMEDOUT) {
            f->never = n == 0;
            if (n < cap)
                waits[n++] = waited;   /* censored: at least this long */
            break;
        }
        if (rc2 != DLOCK_OK)
            die("write acquire");
        if (n < cap)
            waits[n++] = waited;
        f->grants++;
        usleep(WRITE_HOLD_MS * 1000);
        if (dlock_lock_release(w) != DLOCK_OK)
            die("write release");
    }
    atomic_store(&stop, 1);
    for (long i = 0; i < nreaders; i++) {
        pthread_join(rs[i].t, NULL);
        f->read_grants += rs[i].grants;
        if (rs[i].longest_hold / 1e6 > f->read_hold_ms)
            f->read_hold_ms = (double)rs[i].longest_hold / 1e6;
        if (rs[i].longest_wait / 1e6 > f->read_wait_ms)
            f->read_wait_ms = (double)rs[i].longest_wait / 1e6;
        dlock_lock_free(rs[i].l);
    }
    qsort(waits, n, sizeof(int64_t), cmp_i64);
    f->longest_ms = n ? (double)waits[n - 1] / 1e6 : 0;
    f->p50_ms = n ? pct(waits, n, 0.50) / 1000 : 0;
    free(waits);
    free(rs);
    dlock_lock_free(w);
    dlock_client_close(wc);
    dlock_client_close(rc);
}

void writer_first(void)
{
    long nreaders = O.workers ? O.workers : 8;
    long hold_ms = O.hold_ms ? O.hold_ms : 100;
    long seconds = O.seconds ? O.seconds : 30;
    mode_fig off, on;
    run_mode(0, nreaders, hold_ms, seconds, &off);
    run_mode(1, nreaders, hold_ms, seconds, &on);
    /* One round trip, as the writer's wake-up pays it. */
    redisContext *adm = admin();
    enum { PINGS = 2000 };
    int64_t rt[PINGS];
    ping_round_trips(adm, rt, PINGS);
    redisFree(adm);
    printf("{\"peer\":\"dlock\",\"scenario\":\"writerfirst\",\"readers\":%ld,\"read_hold_ms\":%ld,"
           "\"seconds\":%ld,\"write_hold_ms\":%d,\"rtt_p50_us\":%.1f,\"rtt_p99_us\":%.1f,"
           "\"off_longest_wait_ms\":%.1f,\"off_never\":%d,\"off_p50_wait_ms\":%.1f,"
           "\"off_grants\":%ld,\"off_read_grants\":%ld,\"off_longest_read_hold_ms\":%.1f,"
           "\"off_longest_read_wait_ms\":%.1f,\"on_longest_wait_ms\":%.1f,\"on_never\":%d,"
           "\"on_p50_wait_ms\":%.1f,\"on_grants\":%ld,\"on_read_grants\":%ld,"
           "\"on_longest_read_hold_ms\":%.1f,\"on_longest_read_wait_ms\":%.1f}\n",
           nreaders, hold_ms, seconds, WRITE_HOLD_MS, pct(rt, PINGS, 0.50), pct(rt, PINGS, 0.99),
           off.longest_ms, off.never, off.p50_ms, off.grants, off.read_grants, off.read_hold_ms,
           off.read_wait_ms, on.longest_ms, on.never, on.p50_ms, on.grants, on.read_grants,
           on.read_hold_ms, on.read_wait_ms);
}
