/* The asynchronous API's scenarios (include/dlock/async.h).
 *
 *   dlock_bench asyncmany --url U [--inflight 64] [--names 10000] [--seconds S]
 *       one thread drives --inflight acquire/release cycles at a time over
 *       --names names (no contention) through the asynchronous calls: each
 *       completion starts the next call from its callback. cycles/s, to set
 *       beside redis-benchmark -c 50 (one cycle = two scripts).
 *   dlock_bench asyncidle --url U [--pending 10000]
 *       --pending acquisitions of one held lock pending on one client: heap
 *       per pending waiter (mallinfo2, before and after), Redis commands/s
 *       while they wait (INFO commandstats over 3 s), threads of the process;
 *       then the holder lets go and each in turn takes and gives back the
 *       lock (handoffs/s). */
#include <malloc.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "dlock/async.h"
#include "sync/hooks.h"

/* ------------------------------------------------------------ asyncmany */

typedef struct slot {
    long k;                  /* the name this slot cycles on now */
} slot;

static dlock_lock **am_locks;
static long am_inflight;
static atomic_long am_cycles;
static atomic_int am_stop;
static atomic_int am_failed;

static void am_start(slot *s);

static void am_released(const dlock_async_result *res, void *ud)
{
    slot *s = ud;
    if (dlock_async_status(res) != DLOCK_OK) {
        fprintf(stderr, "release: %s\n", dlock_async_message(res));
        atomic_store(&am_failed, 1);
        return;
    }
    atomic_fetch_add_explicit(&am_cycles, 1, memory_order_relaxed);
    s->k += am_inflight;
    if (s->k >= O.names)
        s->k %= am_inflight;
    if (!atomic_load(&am_stop))
        am_start(s);
}

static void am_acquired(const dlock_async_result *res, void *ud)
{
    slot *s = ud;
    if (dlock_async_status(res) != DLOCK_OK ||
        dlock_lock_release_async(am_locks[s->k], am_released, s) != DLOCK_OK) {
        fprintf(stderr, "acquire: %s\n", dlock_async_message(res));
        atomic_store(&am_failed, 1);
    }
}

static void am_start(slot *s)
{
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    if (dlock_lock_acquire_async(
            am_locks[s->k], &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease},
            am_acquired, s) != DLOCK_OK)
        atomic_store(&am_failed, 1);
}

void async_many(void)
{
    am_inflight = O.inflight ? O.inflight : 64;
    if (am_inflight > O.names)
        am_inflight = O.names;
    dlock_client *c = open_client(0, 2);
    /* Name i belongs to slot i % inflight, which acts for its own owner. */
    char (*owners)[DLOCK_OWNER_BUFSIZE] = malloc((size_t)am_inflight * sizeof(*owners));
    for (long i = 0; i < am_inflight; i++)
        if (dlock_client_new_owner_id(c, owners[i], sizeof(owners[i])) != DLOCK_OK)
            die("owner");
    am_locks = malloc(sizeof(*am_locks) * (size_t)O.names);
    for (long i = 0; i < O.names; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:amany:%ld", i);
        if (dlock_lock_get_as(c, name, owners[i % am_inflight], &am_locks[i]) != DLOCK_OK)
            die("get");
    }
    slot *slots = calloc((size_t)am_inflight, sizeof(*slots));
    for (long i = 0; i < am_inflight; i++) {
        slots[i].k = i;
        am_start(&slots[i]);
    }
    usleep(500 * 1000);   /* warm-up: connection, scripts */
    long base = atomic_load(&am_cycles);
    int64_t t0 = now_ns();
    usleep((useconds_t)O.seconds * 1000 * 1000);
    long total = atomic_load(&am_cycles);
    double secs = (double)(now_ns() - t0) / 1e9;
    atomic_store(&am_stop, 1);
    while (dlock_client_async_pending(c) > 0)
        usleep(1000);
    if (atomic_load(&am_failed))
        die("a call failed");
    printf("{\"peer\":\"dlock\",\"scenario\":\"asyncmany\",\"inflight\":%ld,\"names\":%ld,"
           "\"cycles_per_s\":%.0f,\"lease\":\"%s\"}\n",
           am_inflight, O.names, (double)(total - base) / secs, O.lease ? "fixed" : "watchdog");
    dlock_client_close(c);
    for (long i = 0; i < O.names; i++)
        dlock_lock_free(am_locks[i]);
    free(am_locks);
    free(slots);
    free(owners);
}

/* ------------------------------------------------------------ asyncidle */

static dlock_lock **ai_locks;
static atomic_long ai_done;

static void ai_released(const dlock_async_result *res, void *ud)
{
    (void)ud;
    if (dlock_async_status(res) != DLOCK_OK)
        fprintf(stderr, "release: %s\n", dlock_async_message(res));
    atomic_fetch_add(&ai_done, 1);
}

static void ai_acquired(const dlock_async_result *res, void *ud)
{
    long i = (long)(intptr_t)ud;
    if (dlock_async_status(res) != DLOCK_OK ||
        dlock_lock_release_async(ai_locks[i], ai_released, NULL) != DLOCK_OK) {
        fprintf(stderr, "acquire: %s\n", dlock_async_message(res));
        atomic_fetch_add(&ai_done, 1);
    }
}

static int threads_now(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

long long all_commands(redisContext *adm)
{
    redisReply *r = redisCommand(adm, "INFO commandstats");
    long long total = 0;
    const char *p = r && r->str ? r->str : "";
    while ((p = strstr(p, "cmdstat_"))) {
        const char *calls = strstr(p, "calls=");
        if (!calls)
            break;
        if (strncmp(p + 8, "info:", 5) != 0)
            total += atoll(calls + 6);
        p = calls;
    }
    if (r)
        freeReplyObject(r);
    return total;
}

void async_idle(void)
{
    long n = O.pending ? O.pending : 10000;
    redisContext *adm = admin();
    dlock_client *holder_c = open_client(0, 2);
    dlock_client *c = open_client(0, 2);
    dlock_lock *holder;
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(holder_c, owner, sizeof(owner));
    if (dlock_lock_get_as(holder_c, "bench:asyncidle", owner, &holder) != DLOCK_OK ||
        dlock_lock_try(holder, 0, DLOCK_WATCHDOG) != DLOCK_OK)
        die("hold");
    ai_locks = malloc(sizeof(*ai_locks) * (size_t)n);
    for (long i = 0; i < n; i++) {
        dlock_client_new_owner_id(c, owner, sizeof(owner));
        if (dlock_lock_get_as(c, "bench:asyncidle", owner, &ai_locks[i]) != DLOCK_OK)
            die("get");
    }
    int threads0 = threads_now();
    struct mallinfo2 m0 = mallinfo2();
    for (long i = 0; i < n; i++)
        if (dlock_lock_acquire_async(ai_locks[i], &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER},
                                     ai_acquired, (void *)(intptr_t)i) != DLOCK_OK)
            die("acquire_async");
    while (dlock__hook_lock_waiters(ai_locks[0]) < (size_t)n)
        usleep(10 * 1000);
    usleep(500 * 1000);   /* their retries after subscribing answered */
    struct mallinfo2 m1 = mallinfo2();
    int threads1 = threads_now();
    long long c0 = all_commands(adm);
    int64_t t0 = now_ns();
    sleep(3);
    long long c1 = all_commands(adm);
    double secs = (double)(now_ns() - t0) / 1e9;
    /* Then each in turn: the holder lets go, every waiter takes and gives back. */
    int64_t h0 = now_ns();
    dlock_lock_release(holder);
    while (atomic_load(&ai_done) < n)
        usleep(1000);
    double hsecs = (double)(now_ns() - h0) / 1e9;
    printf("{\"peer\":\"dlock\",\"scenario\":\"asyncidle\",\"pending\":%ld,"
           "\"bytes_per_waiter\":%.0f,\"redis_commands_per_s\":%.1f,\"extra_threads\":%d,"
           "\"handoffs_per_s\":%.0f}\n",
           n, (double)(m1.uordblks - m0.uordblks) / (double)n, (double)(c1 - c0) / secs,
           threads1 - threads0, (double)n / hsecs);
    dlock_client_close(c);
    dlock_client_close(holder_c);
    for (long i = 0; i < n; i++)
        dlock_lock_free(ai_locks[i]);
    free(ai_locks);
    dlock_lock_free(holder);
    redisFree(adm);
}
