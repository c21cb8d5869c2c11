/* dlock's side of the benchmark, and the hiredis ceiling loop. Same contract
 * as bench/peers/bench.js: one JSON line on stdout per run.
 *
 *   dlock_bench ceiling  --url U [--cycles N]            EVALSHA of the acquire
 *                                                        script on one blocking
 *                                                        hiredis connection
 *   dlock_bench uncontended --url U [--cycles N] [--lease MS] [--kind lock|semaphore]
 *   dlock_bench ping     --url U [--cycles N]            round trips (dlock_client_ping)
 *   (any scenario: --tag T appends T to the scenario's name, e.g. -tls)
 *   dlock_bench handoff  --url U [--workers 8] [--mode threads|processes] [--seconds S]
 *                        [--kind lock|fair|semaphore]
 *   dlock_bench idle     --url U [--waiters 7] [--hold-ms 3000] [--kind lock|semaphore]
 *   dlock_bench latch    --url U [--awaiters 100] [--procs 4]      (latch_bench.c)
 *   dlock_bench revoke   --url U [--locks 100000] [--watchdog-ms 3000] (revoke_bench.c)
 *   dlock_bench latchfloor [--awaiters 100] [--procs 4]            the same wake-up
 *                                                        without Redis or dlock
 *   dlock_bench many     --url U [--concurrency 16] [--names 10000] [--seconds S]
 *   dlock_bench readers  --url U [--concurrency 8] [--names 10000] [--seconds S]
 *   dlock_bench striped  --url U [--concurrency 16] [--seconds S]   16 stripes against
 *                        one name, workers on random keys (striped_bench.c)
 *                        the read lock of one name, and "many" right before it
 *   dlock_bench held     --url U [--locks 100000] [--watchdog-ms 3000] [--periods 3]
 *   dlock_bench multilock --url U [--multi-names 3] [--cycles N] [--lease MS]
 *   dlock_bench permits  --url U [--permits 4] [--cycles N] [--lease MS]   n permits of a
 *                        permit-expirable semaphore per call, and their list release
 *   dlock_bench redlock  --url U1,U2,U3 [--cycles N] [--lease MS] [--kind blocking|async]
 *                        a RedLock over three servers (redlock_bench.c)
 *   dlock_bench asyncmany --url U [--inflight 64] [--names 10000]   (async_bench.c)
 *   dlock_bench asyncidle --url U [--pending 10000]                 (async_bench.c)
 *   dlock_bench failover --url redis-sentinel://...#M --sentinel H:P (failover_bench.c)
 *   dlock_bench replicated --url redis-replicated://H:P,H:P [--workers 4] [--periods 3]
 *                        the roles swapped with REPLICAOF (replicated_bench.c)
 *
 * Times are CLOCK_MONOTONIC. Locks are taken with the watchdog (dlock's
 * default, as node-redisson's) unless --lease is given. --kind semaphore runs
 * the same scenario on a semaphore of one permit (acquire 1, release 1); its
 * scenario names carry a "sem" prefix. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "sync/hooks.h"

opts O = {NULL, "redis://127.0.0.1:6379", "threads", "lock", 20000, 8, 5, 7, 3000, 16, 10000,
          100000, 3000, 3, 0, 4, 100, 3, 0, 0, 4, "", NULL};

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t first_acquire_ns(dlock_lock *l, int64_t t0, long *failed)
{
    *failed = 0;
    while (now_ns() - t0 < 10000000000LL) {
        if (dlock_lock_try(l, 0, 5000) == DLOCK_OK) {
            int64_t took = now_ns() - t0;
            dlock_lock_release(l);
            return took;
        }
        (*failed)++;
        usleep(1000);
    }
    die("no acquisition within 10 s of the switch of primaries");
    return -1;
}

void die(const char *what)
{
    fprintf(stderr, "dlock_bench: %s: %s\n", what, dlock_last_error());
    exit(1);
}

static void log_to_stderr(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(stderr, "%ld.%06ld [%d] L%d %s\n", (long)ts.tv_sec % 1000, ts.tv_nsec / 1000,
            (int)getpid(), (int)level, msg);
}

dlock_client *open_client(long watchdog_ms, int pool)
{
    dlock_config *cfg = dlock_config_new();
    if (getenv("DLOCK_BENCH_LOG"))   /* diagnostics: the library's log on stderr */
        dlock_config_set_log_callback(cfg, log_to_stderr, NULL, DLOCK_LOG_DEBUG);
    if (dlock_config_set_url(cfg, O.url) != DLOCK_OK)
        die("url");
    if (watchdog_ms)
        dlock_config_set_watchdog_timeout(cfg, watchdog_ms);
    if (pool)
        dlock_config_set_pool_size(cfg, pool);
    if (getenv("DLOCK_BENCH_REVOCATION"))   /* 0: renewal-time detection only (A/B runs) */
        dlock_config_set_revocation(cfg, atoi(getenv("DLOCK_BENCH_REVOCATION")));
    dlock_client *c;
    if (dlock_client_open(&c, cfg) != DLOCK_OK)
        die("open");
    dlock_config_free(cfg);
    return c;
}

/* A plain connection to the server of O.url (on a cluster: its first seed). */
redisContext *admin(void)
{
    char host[256], path[256];
    int port = 0;
    if (dlock__hook_server(O.url, host, sizeof(host), &port, path, sizeof(path)) != DLOCK_OK)
        die("url");
    redisContext *c = path[0] ? redisConnectUnix(path) : redisConnect(host, port);
    if (!c || c->err) {
        fprintf(stderr, "dlock_bench: cannot connect\n");
        exit(1);
    }
    return c;
}

void ping_round_trips(redisContext *c, int64_t *rt, long n)
{
    for (long i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        redisReply *r = redisCommand(c, "PING");
        if (!r)
            die("ping");
        freeReplyObject(r);
        rt[i] = now_ns() - t0;
    }
    qsort(rt, (size_t)n, sizeof(int64_t), cmp_i64);
}

long long info_field(redisContext *c, const char *section, const char *field)
{
    redisReply *r = redisCommand(c, "INFO %s", section);
    const char *p = r && r->str ? strstr(r->str, field) : NULL;
    long long v = p ? atoll(p + strlen(field)) : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double pct(int64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;   /* ns -> us */
}

static double cpu_ms_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1000.0 + ru.ru_utime.tv_usec / 1000.0 + ru.ru_stime.tv_sec * 1000.0 +
           ru.ru_stime.tv_usec / 1000.0;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ------------------------------------------------------ what is taken */

/* The object a scenario takes turns on: a lock (reentrant or fair) or a
 * semaphore of one permit. */
typedef struct res {
    dlock_lock *l;
    dlock_semaphore *s;
} res;

static int is_sem(void) { return strcmp(O.kind, "semaphore") == 0; }

static void res_get(dlock_client *c, const char *name, res *r)
{
    memset(r, 0, sizeof(*r));
    int rc;
    if (is_sem()) {
        char sname[96];
        snprintf(sname, sizeof(sname), "%s:sem", name);
        rc = dlock_semaphore_get(c, sname, &r->s);
        if (rc == DLOCK_OK)
            rc = dlock_semaphore_try_set_permits(r->s, 1, NULL);
    } else if (strcmp(O.kind, "fair") == 0) {
        rc = dlock_fair_lock_get(c, name, &r->l);
    } else {
        rc = dlock_lock_get(c, name, &r->l);
    }
    if (rc != DLOCK_OK)
        die("get");
}

static int res_acquire(res *r, int64_t lease)
{
    return r->s ? dlock_semaphore_acquire(r->s, 1) : dlock_lock_acquire(r->l, lease);
}

static int res_release(res *r)
{
    return r->s ? dlock_semaphore_release(r->s, 1) : dlock_lock_release(r->l);
}

static void res_free(res *r)
{
    dlock_semaphore_free(r->s);
    dlock_lock_free(r->l);
}

/* The scenario's name as reported: "sem" + name for semaphores. */
static const char *scen(const char *name)
{
    static char buf[64];
    snprintf(buf, sizeof(buf), "%s%s%s", is_sem() ? "sem" : "", name, O.tag);
    return buf;
}

/* ------------------------------------------------------------- ceiling */

static void ceiling(void)
{
    redisContext *c = admin();
    size_t blen;
    const char *body = dlock__hook_acquire_script(&blen);
    redisReply *r = redisCommand(c, "SCRIPT LOAD %b", body, blen);
    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
        die("script load");
    char sha[41];
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    const char *owner = "00000000-0000-0000-0000-000000000000:1";
    for (int i = 0; i < 1000; i++)   /* warm-up */
        freeReplyObject(redisCommand(c, "EVALSHA %s 3 bench:ceiling tok next 30000 %s 0 0 50", sha, owner));
    int64_t t0 = now_ns();
    for (long i = 0; i < O.cycles; i++) {
        r = redisCommand(c, "EVALSHA %s 3 bench:ceiling tok next 30000 %s 0 0 50", sha, owner);
        if (!r)
            die("evalsha");
        freeReplyObject(r);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    freeReplyObject(redisCommand(c, "DEL bench:ceiling"));
    printf("{\"peer\":\"hiredis-loop\",\"scenario\":\"ceiling\",\"calls\":%ld,\"seconds\":%.3f,"
           "\"calls_per_s\":%.0f,\"cycles_per_s\":%.0f}\n",
           O.cycles, secs, O.cycles / secs, O.cycles / secs / 2);
    redisFree(c);
}

/* ---------------------------------------------------------- uncontended */

static void uncontended(void)
{
    dlock_client *c = open_client(0, 0);
    res l;
    res_get(c, "bench:uncontended", &l);
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    for (int i = 0; i < 1000; i++) {   /* warm-up: connection, script cache */
        if (res_acquire(&l, lease) != DLOCK_OK || res_release(&l) != DLOCK_OK)
            die("warm-up");
    }
    int64_t *lat = malloc(sizeof(int64_t) * (size_t)O.cycles);
    double cpu0 = cpu_ms_self();   /* every thread of the client: caller and io thread */
    int64_t t0 = now_ns();
    for (long i = 0; i < O.cycles; i++) {
        int64_t a = now_ns();
        if (res_acquire(&l, lease) != DLOCK_OK)
            die("acquire");
        if (res_release(&l) != DLOCK_OK)
            die("release");
        lat[i] = now_ns() - a;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    double cpu_us = (cpu_ms_self() - cpu0) * 1000.0 / (double)O.cycles;
    qsort(lat, (size_t)O.cycles, sizeof(int64_t), cmp_i64);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"cycles\":%ld,\"seconds\":%.3f,"
           "\"cycles_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"lease\":\"%s\","
           "\"client_cpu_us_per_cycle\":%.2f}\n",
           scen("uncontended"), O.cycles, secs, O.cycles / secs, pct(lat, (size_t)O.cycles, 0.50),
           pct(lat, (size_t)O.cycles, 0.99), pct(lat, (size_t)O.cycles, 0.999),
           O.lease ? "fixed" : "watchdog", cpu_us);
    free(lat);
    res_free(&l);
    dlock_client_close(c);
}

/* ----------------------------------------------------------------- ping */

/* Round trips through dlock's blocking pool (dlock_client_ping): over TLS
 * and plain, the cost of TLS per round trip. */
static void ping(void)
{
    dlock_client *c = open_client(0, 0);
    for (int i = 0; i < 1000; i++)   /* warm-up: the connection and its handshake */
        if (dlock_client_ping(c) != DLOCK_OK)
            die("warm-up");
    int64_t *lat = malloc(sizeof(int64_t) * (size_t)O.cycles);
    int64_t t0 = now_ns();
    for (long i = 0; i < O.cycles; i++) {
        int64_t a = now_ns();
        if (dlock_client_ping(c) != DLOCK_OK)
            die("ping");
        lat[i] = now_ns() - a;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    qsort(lat, (size_t)O.cycles, sizeof(int64_t), cmp_i64);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"calls\":%ld,\"seconds\":%.3f,"
           "\"calls_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
           scen("ping"), O.cycles, secs, O.cycles / secs, pct(lat, (size_t)O.cycles, 0.50),
           pct(lat, (size_t)O.cycles, 0.99));
    free(lat);
    dlock_client_close(c);
}

/* ------------------------------------------------------------ multilock */

/* O.cycles cycles of acquire(ud) then release(ud), timed, with the round
 * trips each took (the library's per-thread counter of writes, and client
 * c's io thread's for its asynchronous round trips) and the EVALSHAs Redis
 * counted meanwhile. lat: O.cycles entries, sorted. */
typedef struct cycled {
    double secs;
    uint64_t rt_acq, rt_rel;
    long long evalsha;
    int64_t *lat;
} cycled;

static uint64_t writes(dlock_client *c)
{
    return dlock__hook_roundtrips() + dlock__hook_async_writes(c);
}

static void run_cycles(dlock_client *c, int (*acq)(void *), int (*rel)(void *), void *ud,
                       cycled *out)
{
    redisContext *adm = admin();
    long long ev0 = info_field(adm, "commandstats", "cmdstat_evalsha:calls=");
    *out = (cycled){.lat = malloc(sizeof(int64_t) * (size_t)O.cycles)};
    if (!out->lat)
        die("memory");
    int64_t t0 = now_ns();
    for (long i = 0; i < O.cycles; i++) {
        int64_t a = now_ns();
        uint64_t r0 = writes(c);
        if (acq(ud) != DLOCK_OK)
            die("acquire");
        uint64_t r1 = writes(c);
        if (rel(ud) != DLOCK_OK)
            die("release");
        out->rt_acq += r1 - r0;
        out->rt_rel += writes(c) - r1;
        out->lat[i] = now_ns() - a;
    }
    out->secs = (double)(now_ns() - t0) / 1e9;
    out->evalsha = info_field(adm, "commandstats", "cmdstat_evalsha:calls=") - ev0;
    qsort(out->lat, (size_t)O.cycles, sizeof(int64_t), cmp_i64);
    redisFree(adm);
}

/* A multi-lock of --multi-names (default 3) names on one server, uncontended:
 * acquire + release cycles, with the round trips each takes (the library's
 * per-thread counter of writes, checked against the EVALSHAs Redis counted),
 * beside a single lock's cycles in the same process, run for run. */
static double single_cycles(dlock_lock *l, int64_t lease, long cycles)
{
    int64_t t0 = now_ns();
    for (long i = 0; i < cycles; i++)
        if (dlock_lock_acquire(l, lease) != DLOCK_OK || dlock_lock_release(l) != DLOCK_OK)
            die("single");
    return cycles / ((double)(now_ns() - t0) / 1e9);
}

typedef struct ml_run {
    dlock_multilock *ml;
    int64_t lease;
} ml_run;

static int ml_acquire(void *ud)
{
    ml_run *r = ud;
    return dlock_multilock_acquire(r->ml, r->lease);
}

static int ml_release(void *ud) { return dlock_multilock_release(((ml_run *)ud)->ml); }

static void multilock(void)
{
    long k = O.multi_names;
    if (k < 1 || k > 64)
        die("names");
    dlock_client *c = open_client(0, 0);
    dlock_lock *l[64], *single;
    char name[64];
    for (long i = 0; i < k; i++) {
        snprintf(name, sizeof(name), "bench:multi:%ld", i);
        if (dlock_lock_get(c, name, &l[i]) != DLOCK_OK)
            die("get");
    }
    if (dlock_lock_get(c, "bench:uncontended", &single) != DLOCK_OK)
        die("get");
    dlock_multilock *ml;
    if (dlock_multilock_new(l, (size_t)k, &ml) != DLOCK_OK)
        die("multilock");
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    for (int i = 0; i < 1000; i++)   /* warm-up: connection, script cache */
        if (dlock_multilock_acquire(ml, lease) != DLOCK_OK || dlock_multilock_release(ml) != DLOCK_OK)
            die("warm-up");
    double single_cps = single_cycles(single, lease, O.cycles);
    ml_run run = {ml, lease};
    cycled cy;
    run_cycles(c, ml_acquire, ml_release, &run, &cy);
    printf("{\"peer\":\"dlock\",\"scenario\":\"multilock\",\"names\":%ld,\"cycles\":%ld,"
           "\"seconds\":%.3f,\"cycles_per_s\":%.0f,\"single_cycles_per_s\":%.0f,"
           "\"roundtrips_per_acquire\":%.3f,\"roundtrips_per_release\":%.3f,"
           "\"evalsha_per_cycle\":%.3f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"lease\":\"%s\"}\n",
           k, O.cycles, cy.secs, O.cycles / cy.secs, single_cps, (double)cy.rt_acq / O.cycles,
           (double)cy.rt_rel / O.cycles, (double)cy.evalsha / O.cycles,
           pct(cy.lat, (size_t)O.cycles, 0.50), pct(cy.lat, (size_t)O.cycles, 0.99),
           O.lease ? "fixed" : "watchdog");
    free(cy.lat);
    dlock_multilock_free(ml);
    for (long i = 0; i < k; i++)
        dlock_lock_free(l[i]);
    dlock_lock_free(single);
    dlock_client_close(c);
}

/* -------------------------------------------------------------- handoff */

#define MAX_EVENTS 2000000

typedef struct handoff_shm {
    atomic_int seq;             /* acquisitions so far; a holder bumps it (futex word) */
    atomic_int ready;           /* workers connected; they start together (futex word) */
    atomic_long next_event;
    atomic_long waits_over_1s;
    atomic_long long_wait_attempts;   /* attempts made during those long waits */
    atomic_llong max_wait_ns;
    atomic_long attempts;            /* acquire scripts sent, all acquisitions */
    atomic_long needless;            /* wake-ups that found the lock taken again */
    atomic_int stop;
    struct {
        int64_t acq, rel;
    } ev[MAX_EVENTS];
} handoff_shm;

static handoff_shm *H;

static void handoff_worker(dlock_client *c, int id)
{
    (void)id;
    res l;
    res_get(c, strcmp(O.kind, "fair") == 0 ? "bench:fairhandoff" : "bench:handoff", &l);
    /* Start together once every worker is connected: a worker still opening
     * its client is not a waiter yet, and its first acquire would measure that. */
    atomic_fetch_add(&H->ready, 1);
    syscall(SYS_futex, &H->ready, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    for (int r; (r = atomic_load(&H->ready)) < O.workers;)
        syscall(SYS_futex, &H->ready, FUTEX_WAIT, r, NULL, NULL, 0);
    while (!atomic_load(&H->stop)) {
        int64_t t0 = now_ns();
        uint64_t a0 = dlock__hook_attempts(), w0 = dlock__hook_wakeups_wasted();
        if (res_acquire(&l, DLOCK_WATCHDOG) != DLOCK_OK)
            die("acquire");
        int64_t t_acq = now_ns();
        int64_t waited = t_acq - t0;
        long made = (long)(dlock__hook_attempts() - a0);
        atomic_fetch_add(&H->attempts, made);
        /* Wake-ups by a message whose attempt found the lock taken again. */
        atomic_fetch_add(&H->needless, (long)(dlock__hook_wakeups_wasted() - w0));
        if (waited > 1000000000LL) {
            atomic_fetch_add(&H->waits_over_1s, 1);
            atomic_fetch_add(&H->long_wait_attempts, (long)(dlock__hook_attempts() - a0));
            if (getenv("DLOCK_BENCH_LOG"))
                fprintf(stderr, "[%d] waited %.0f ms (acquired at %.3f)\n", (int)getpid(),
                        waited / 1e6, (t_acq / 1000) % 1000000000 / 1e6);
        }
        long long m = atomic_load(&H->max_wait_ns);
        while (waited > m && !atomic_compare_exchange_weak(&H->max_wait_ns, &m, waited)) {
        }
        int mine = atomic_fetch_add(&H->seq, 1) + 1;
        /* The previous holder sleeps on seq until it changes. */
        syscall(SYS_futex, &H->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
        long e = atomic_fetch_add(&H->next_event, 1);
        /* hold ~1 ms */
        struct timespec hold = {0, 1000000};
        nanosleep(&hold, NULL);
        if (res_release(&l) != DLOCK_OK)
            die("release");
        int64_t t_rel = now_ns();
        if (e < MAX_EVENTS) {
            H->ev[e].acq = t_acq;
            H->ev[e].rel = t_rel;
        }
        /* Wait until another worker holds it, so that every acquisition is a
         * real wake-up of a waiter. A futex (shared across processes): no
         * polling to steal the client CPU from the handoff being measured. */
        while (atomic_load(&H->seq) == mine && !atomic_load(&H->stop)) {
            struct timespec ts = {0, 50000000};   /* re-check stop now and then */
            syscall(SYS_futex, &H->seq, FUTEX_WAIT, mine, &ts, NULL, 0);
        }
    }
    res_free(&l);
}

static void *handoff_thread(void *arg)
{
    handoff_worker(arg, 0);
    return NULL;
}

static int cmp_acq(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static void handoff(void)
{
    H = mmap(NULL, sizeof(*H), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (H == MAP_FAILED)
        die("mmap");
    int procs = strcmp(O.mode, "processes") == 0;
    pid_t pids[64];
    pthread_t th[64];
    dlock_client *c = NULL;
    int64_t t0 = now_ns();
    if (procs) {
        for (long i = 0; i < O.workers; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                dlock_client *cc = open_client(0, 0);
                handoff_worker(cc, (int)i);
                dlock_client_close(cc);
                _exit(0);
            }
        }
    } else {
        c = open_client(0, (int)O.workers + 2);
        for (long i = 0; i < O.workers; i++)
            pthread_create(&th[i], NULL, handoff_thread, c);
    }
    while (atomic_load(&H->ready) < O.workers)
        usleep(1000);
    t0 = now_ns();
    sleep((unsigned)O.seconds);
    atomic_store(&H->stop, 1);
    for (long i = 0; i < O.workers; i++) {
        if (procs)
            waitpid(pids[i], NULL, 0);
        else
            pthread_join(th[i], NULL);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    long n = atomic_load(&H->next_event);
    if (n > MAX_EVENTS)
        n = MAX_EVENTS;
    qsort(H->ev, (size_t)n, sizeof(H->ev[0]), cmp_acq);
    int64_t *gaps = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    size_t g = 0;
    for (long i = 1; i < n; i++) {
        int64_t gap = H->ev[i].acq - H->ev[i - 1].rel;
        gaps[g++] = gap > 0 ? gap : 0;   /* the next holder may return before the releaser */
    }
    qsort(gaps, g, sizeof(int64_t), cmp_i64);
    long acqs = atomic_load(&H->next_event);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"mode\":\"%s\",\"workers\":%ld,"
           "\"acquisitions\":%ld,\"acq_per_s\":%.0f,\"gap_p50_us\":%.1f,\"gap_p99_us\":%.1f,"
           "\"gap_max_us\":%.1f,\"waits_over_1s\":%ld,\"long_wait_attempts\":%ld,"
           "\"max_wait_ms\":%.1f,\"attempts_per_acq\":%.3f,\"needless_wakeups\":%ld}\n",
           strcmp(O.kind, "fair") == 0 ? "fairhandoff" : scen("handoff"), O.mode, O.workers, n, n / secs,
           pct(gaps, g, 0.5), pct(gaps, g, 0.99), g ? gaps[g - 1] / 1000.0 : 0.0,
           atomic_load(&H->waits_over_1s), atomic_load(&H->long_wait_attempts),
           atomic_load(&H->max_wait_ns) / 1e6,
           acqs ? (double)atomic_load(&H->attempts) / (double)acqs : 0.0,
           atomic_load(&H->needless));
    free(gaps);
    if (c)
        dlock_client_close(c);
    munmap(H, sizeof(*H));
}

/* ----------------------------------------------------------------- idle */

static void *idle_waiter(void *arg)
{
    res l;
    res_get(arg, "bench:idle", &l);
    if (res_acquire(&l, DLOCK_WATCHDOG) != DLOCK_OK)
        die("acquire");
    res_release(&l);
    res_free(&l);
    return NULL;
}

static void idle(void)
{
    redisContext *adm = admin();
    int ready[2];
    if (pipe(ready) != 0)
        die("pipe");
    pid_t holder = fork();
    if (holder == 0) {   /* the holder runs apart: its CPU is not the waiters' */
        dlock_client *hc = open_client(0, 0);
        res l;
        res_get(hc, "bench:idle", &l);
        if (res_acquire(&l, DLOCK_WATCHDOG) != DLOCK_OK)
            die("holder");
        char b = 1;
        if (write(ready[1], &b, 1) != 1)
            _exit(1);
        usleep((useconds_t)(O.hold_ms * 1000 + 600000));   /* waiters settle, then the hold */
        res_release(&l);
        res_free(&l);
        dlock_client_close(hc);
        _exit(0);
    }
    char b;
    if (read(ready[0], &b, 1) != 1)
        die("holder");
    dlock_client *c = open_client(0, (int)O.waiters + 2);
    pthread_t th[64];
    for (long i = 0; i < O.waiters; i++)
        pthread_create(&th[i], NULL, idle_waiter, c);
    usleep(500000);   /* subscribed and asleep */
    long long cmd0 = info_field(adm, "stats", "total_commands_processed:");
    double cpu0 = cpu_ms_self();
    int64_t t0 = now_ns();
    usleep((useconds_t)(O.hold_ms * 1000));
    double secs = (double)(now_ns() - t0) / 1e9;
    double cpu = cpu_ms_self() - cpu0;
    long long cmds = info_field(adm, "stats", "total_commands_processed:") - cmd0 - 1;
    for (long i = 0; i < O.waiters; i++)
        pthread_join(th[i], NULL);
    waitpid(holder, NULL, 0);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"waiters\":%ld,\"hold_ms\":%ld,"
           "\"redis_commands\":%lld,\"redis_commands_per_s\":%.1f,\"waiter_cpu_ms\":%.1f}\n",
           scen("idle"), O.waiters, O.hold_ms, cmds, cmds / secs, cpu);
    dlock_client_close(c);
    redisFree(adm);
}

/* ----------------------------------------------------------------- many */

typedef struct many_arg {
    long id;
    long cycles;
    dlock_lock **locks;
    long nlocks;
} many_arg;

static atomic_int many_stop;

static void *many_thread(void *arg)
{
    many_arg *a = arg;
    long k = a->id % a->nlocks;
    int64_t lease = O.lease ? O.lease : DLOCK_WATCHDOG;
    while (!atomic_load(&many_stop)) {
        dlock_lock *l = a->locks[k];
        if (dlock_lock_acquire(l, lease) != DLOCK_OK || dlock_lock_release(l) != DLOCK_OK)
            die("cycle");
        a->cycles++;
        k += O.concurrency;
        if (k >= a->nlocks)
            k = a->id % a->nlocks;
    }
    return NULL;
}

/* O.concurrency threads cycling over locks[0..n) (thread i takes i, i +
 * concurrency, ...) for run_ms after a warm-up: cycles per second. */
static double cycle_rate(dlock_lock **locks, long n, long warm_ms, long run_ms)
{
    pthread_t th[256];
    many_arg args[256];
    atomic_store(&many_stop, 0);
    for (long i = 0; i < O.concurrency; i++) {
        args[i] = (many_arg){i, 0, locks, n};
        pthread_create(&th[i], NULL, many_thread, &args[i]);
    }
    usleep((useconds_t)warm_ms * 1000);   /* warm-up: connections opened, scripts cached */
    long base = 0;
    for (long i = 0; i < O.concurrency; i++)
        base += args[i].cycles;   /* racy read, a warm-up count only */
    int64_t t0 = now_ns();
    usleep((useconds_t)run_ms * 1000);
    long total = 0;
    for (long i = 0; i < O.concurrency; i++)
        total += args[i].cycles;
    double secs = (double)(now_ns() - t0) / 1e9;
    atomic_store(&many_stop, 1);
    for (long i = 0; i < O.concurrency; i++)
        pthread_join(th[i], NULL);
    return (double)(total - base) / secs;
}

static dlock_lock **many_names(dlock_client *c)
{
    dlock_lock **locks = malloc(sizeof(*locks) * (size_t)O.names);
    for (long i = 0; i < O.names; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:many:%ld", i);
        if (dlock_lock_get(c, name, &locks[i]) != DLOCK_OK)
            die("get");
    }
    return locks;
}

static void free_locks(dlock_lock **locks, long n)
{
    for (long i = 0; i < n; i++)
        dlock_lock_free(locks[i]);
    free(locks);
}

static void many(void)
{
    dlock_client *c = open_client(0, (int)O.concurrency + 2);
    dlock_lock **locks = many_names(c);
    double rate = cycle_rate(locks, O.names, 500, O.seconds * 1000);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"concurrency\":%ld,\"names\":%ld,"
           "\"cycles_per_s\":%.0f,\"lease\":\"%s\"}\n",
           scen("many"), O.concurrency, O.names, rate, O.lease ? "fixed" : "watchdog");
    free_locks(locks, O.names);
    dlock_client_close(c);
}

/* The read lock of ONE name, O.concurrency readers cycling on it (they never
 * wait for each other), against the reentrant lock over many names with as
 * many threads, in the same process: O.seconds of each, in alternating
 * half-second rounds, so that the machine's fast and slow moments fall on
 * both sides of the ratio. */
static void readers(void)
{
    dlock_client *c = open_client(0, (int)O.concurrency + 2);
    dlock_lock **locks = many_names(c);
    dlock_lock *r;
    if (dlock_read_lock_get(c, "bench:rwlock", &r) != DLOCK_OK)
        die("get");
    cycle_rate(locks, O.names, 300, 200);   /* warm-up of both */
    cycle_rate(&r, 1, 100, 200);
    double ref = 0, rate = 0;
    long rounds = O.seconds * 2;
    for (long i = 0; i < rounds; i++) {
        ref += cycle_rate(locks, O.names, 50, 500) / (double)rounds;
        rate += cycle_rate(&r, 1, 50, 500) / (double)rounds;
    }
    dlock_lock_free(r);
    free_locks(locks, O.names);
    printf("{\"peer\":\"dlock\",\"scenario\":\"readers\",\"concurrency\":%ld,\"names\":%ld,"
           "\"cycles_per_s\":%.0f,\"many_cycles_per_s\":%.0f,\"ratio\":%.3f,\"lease\":\"%s\"}\n",
           O.concurrency, O.names, rate, ref, rate / ref, O.lease ? "fixed" : "watchdog");
    dlock_client_close(c);
}

/* ----------------------------------------------------------------- held */

typedef struct held_arg {
    dlock_client *c;
    long from, to;
    const char *owner;
} held_arg;

static void *held_acquire(void *arg)
{
    held_arg *a = arg;
    for (long i = a->from; i < a->to; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:held:%ld", i);
        dlock_lock *l;
        if (dlock_lock_get_as(a->c, name, a->owner, &l) != DLOCK_OK ||
            dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK)
            die("acquire");
        dlock_lock_free(l);   /* the hold (and its renewal) outlives the handle */
    }
    return NULL;
}

static long long commandstats_total(redisContext *c, long long *evalsha)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    long long total = 0;
    *evalsha = 0;
    const char *p = r && r->str ? r->str : "";
    while ((p = strstr(p, "cmdstat_"))) {
        const char *name = p + 8;
        const char *calls = strstr(p, "calls=");
        if (!calls)
            break;
        long long n = atoll(calls + 6);
        if (strncmp(name, "info:", 5) != 0)
            total += n;
        if (strncmp(name, "evalsha:", 8) == 0)
            *evalsha = n;
        p = calls;
    }
    if (r)
        freeReplyObject(r);
    return total;
}

static void held(void)
{
    redisContext *adm = admin();
    long rss0 = rss_kb();
    dlock_client *c = open_client(O.watchdog_ms, 16);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(c, owner, sizeof(owner));
    long rss1 = rss_kb();   /* the client itself */
    enum { T = 8 };
    pthread_t th[T];
    held_arg args[T];
    int64_t t0 = now_ns();
    for (int i = 0; i < T; i++) {
        args[i] = (held_arg){c, O.locks * i / T, O.locks * (i + 1) / T, owner};
        pthread_create(&th[i], NULL, held_acquire, &args[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    double acquire_s = (double)(now_ns() - t0) / 1e9;
    long rss2 = rss_kb();
    /* Let the acquisitions (several periods long at 100 000 locks) fall into
     * one renewal rhythm, then measure whole periods of the steady state. */
    usleep((useconds_t)(O.watchdog_ms * 1000 / 3 * 2));
    long long ev0, ev1;
    long long tot0 = commandstats_total(adm, &ev0);
    dlock_stats st0, st1;
    dlock_client_stats(c, &st0, sizeof(st0));
    double cpu0 = cpu_ms_self();
    int64_t w0 = now_ns();
    usleep((useconds_t)(O.watchdog_ms * 1000 / 3 * O.periods));
    double cpu = cpu_ms_self() - cpu0;
    long long tot1 = commandstats_total(adm, &ev1);
    dlock_client_stats(c, &st1, sizeof(st1));
    /* The client's own count of renewal writes (a node's batches of a pass
     * share one write and one round trip), per node: on a cluster the INFO
     * above sees one node only. */
    size_t nodes = dlock__hook_primaries(c);
    /* Per period over the window actually measured (as the peer drivers do). */
    double periods = (double)(now_ns() - w0) / 1e6 / ((double)O.watchdog_ms / 3.0);
    size_t still = dlock__hook_held(c);
    printf("{\"peer\":\"dlock\",\"scenario\":\"%s\",\"locks\":%ld,\"periods\":%ld,"
           "\"window_periods\":%.3f,\"acquire_s\":%.1f,\"renewal_round_trips_per_period\":%.1f,"
           "\"redis_commands_per_period\":%.1f,\"bytes_per_lock\":%.0f,\"hold_cpu_ms\":%.1f,"
           "\"client_rss_kb\":%ld,\"locks_still_held\":%zu,\"nodes\":%zu,"
           "\"renewal_batches_per_node_per_period\":%.2f,\"renewal_writes_per_node_per_period\":%.2f}\n",
           scen("held"), O.locks, O.periods, periods, acquire_s, (double)(ev1 - ev0) / periods,
           (double)(tot1 - tot0) / periods, (double)(rss2 - rss1) * 1024.0 / O.locks, cpu, rss0,
           still, nodes,
           (double)(st1.renewal_roundtrips - st0.renewal_roundtrips) / periods / (double)nodes,
           (double)(st1.renewal_writes - st0.renewal_writes) / periods / (double)nodes);
    dlock_client_close(c);   /* the holds expire with their lease */
    freeReplyObject(redisCommand(adm, "FLUSHDB"));
    redisFree(adm);
}

/* ------------------------------------------------------------- permits */

/* n permits of a permit-expirable semaphore taken in one call and given back
 * in one list release (Redisson's acquire(permits, lease) and
 * release(List)): round trips and EVALSHA per call, which should be 1 each
 * whatever n. --permits N (default 4); the lease is --lease or 30 s. */
typedef struct pn_run {
    dlock_permit_semaphore *p;
    long n;
    int64_t lease;
    char (*ids)[DLOCK_PERMIT_ID_BUFSIZE];
    const char **list;
} pn_run;

static int pn_acquire(void *ud)
{
    pn_run *r = ud;
    return dlock_permit_semaphore_acquire_n(r->p, r->n, r->lease, r->ids);
}

static int pn_release(void *ud)
{
    pn_run *r = ud;
    return dlock_permit_semaphore_release_list(r->p, r->list, (size_t)r->n);
}

static void permits_n(void)
{
    long n = O.permits;
    if (n < 1 || n > 64)
        die("permits");
    dlock_client *c = open_client(0, 0);
    dlock_permit_semaphore *p;
    if (dlock_permit_semaphore_get(c, "bench:permits", &p) != DLOCK_OK ||
        dlock_permit_semaphore_set_total(p, n) != DLOCK_OK)
        die("semaphore");
    int64_t lease = O.lease ? O.lease : 30000;
    char ids[64][DLOCK_PERMIT_ID_BUFSIZE];
    const char *list[64];
    for (long i = 0; i < n; i++)
        list[i] = ids[i];
    for (int i = 0; i < 1000; i++)   /* warm-up: connection, script cache */
        if (dlock_permit_semaphore_acquire_n(p, n, lease, ids) != DLOCK_OK ||
            dlock_permit_semaphore_release_list(p, list, (size_t)n) != DLOCK_OK)
            die("warm-up");
    pn_run run = {p, n, lease, ids, list};
    cycled cy;
    run_cycles(c, pn_acquire, pn_release, &run, &cy);
    printf("{\"peer\":\"dlock\",\"scenario\":\"permits%ld\",\"permits\":%ld,\"cycles\":%ld,"
           "\"seconds\":%.3f,\"cycles_per_s\":%.0f,\"roundtrips_per_acquire\":%.3f,"
           "\"roundtrips_per_release\":%.3f,\"evalsha_per_cycle\":%.3f,\"p50_us\":%.1f,"
           "\"p99_us\":%.1f}\n",
           n, n, O.cycles, cy.secs, O.cycles / cy.secs, (double)cy.rt_acq / O.cycles,
           (double)cy.rt_rel / O.cycles, (double)cy.evalsha / O.cycles,
           pct(cy.lat, (size_t)O.cycles, 0.50), pct(cy.lat, (size_t)O.cycles, 0.99));
    free(cy.lat);
    dlock_permit_semaphore_free(p);
    dlock_client_close(c);
}

/* ----------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        fprintf(stderr, "usage: dlock_bench ceiling|uncontended|ping|handoff|idle|many|readers|striped|held|"
                        "multilock|permits|redlock|latch|latchfloor|asyncmany|asyncidle|revoke|failover|replicated|spin|writerfirst|revokereq [--url U] ...\n");
        return 64;
    }
    O.scenario = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--url")) O.url = v;
        else if (!strcmp(k, "--mode")) O.mode = v;
        else if (!strcmp(k, "--kind")) O.kind = v;
        else if (!strcmp(k, "--cycles")) O.cycles = atol(v);
        else if (!strcmp(k, "--workers")) O.workers = atol(v);
        else if (!strcmp(k, "--seconds")) O.seconds = atol(v);
        else if (!strcmp(k, "--waiters")) O.waiters = atol(v);
        else if (!strcmp(k, "--hold-ms")) O.hold_ms = atol(v);
        else if (!strcmp(k, "--concurrency")) O.concurrency = atol(v);
        else if (!strcmp(k, "--names")) O.names = atol(v);
        else if (!strcmp(k, "--locks")) O.locks = atol(v);
        else if (!strcmp(k, "--watchdog-ms")) O.watchdog_ms = atol(v);
        else if (!strcmp(k, "--periods")) O.periods = atol(v);
        else if (!strcmp(k, "--lease")) O.lease = atol(v);
        else if (!strcmp(k, "--multi-names")) O.multi_names = atol(v);
        else if (!strcmp(k, "--permits")) O.permits = atol(v);
        else if (!strcmp(k, "--procs")) O.procs = atol(v);
        else if (!strcmp(k, "--awaiters")) O.awaiters = atol(v);
        else if (!strcmp(k, "--tag")) O.tag = v;
        else if (!strcmp(k, "--inflight")) O.inflight = atol(v);
        else if (!strcmp(k, "--pending")) O.pending = atol(v);
        else if (!strcmp(k, "--sentinel")) O.sentinel = v;
        else {
            fprintf(stderr, "dlock_bench: unknown option %s\n", k);
            return 64;
        }
    }
    if (O.workers > 64 || O.waiters > 64 || O.concurrency > 256 || O.procs < 1 || O.procs > 64 ||
        O.awaiters < O.procs || O.awaiters > 256 * O.procs)
        return 64;
    if (!strcmp(O.scenario, "ceiling")) ceiling();
    else if (!strcmp(O.scenario, "uncontended")) uncontended();
    else if (!strcmp(O.scenario, "ping")) ping();
    else if (!strcmp(O.scenario, "handoff")) handoff();
    else if (!strcmp(O.scenario, "idle")) idle();
    else if (!strcmp(O.scenario, "many")) many();
    else if (!strcmp(O.scenario, "readers")) readers();
    else if (!strcmp(O.scenario, "striped")) striped();
    else if (!strcmp(O.scenario, "held")) held();
    else if (!strcmp(O.scenario, "multilock")) multilock();
    else if (!strcmp(O.scenario, "permits")) permits_n();
    else if (!strcmp(O.scenario, "redlock")) redlock();
    else if (!strcmp(O.scenario, "latch")) latch();
    else if (!strcmp(O.scenario, "latchfloor")) latch_floor();
    else if (!strcmp(O.scenario, "asyncmany")) async_many();
    else if (!strcmp(O.scenario, "asyncidle")) async_idle();
    else if (!strcmp(O.scenario, "revoke")) revocation();
    else if (!strcmp(O.scenario, "failover")) failover();
    else if (!strcmp(O.scenario, "replicated")) replicated();
    else if (!strcmp(O.scenario, "spin")) spin();
    else if (!strcmp(O.scenario, "writerfirst")) writer_first();
    else if (!strcmp(O.scenario, "revokereq")) revoke_request();
    else {
        fprintf(stderr, "dlock_bench: unknown scenario %s\n", O.scenario);
        return 64;
    }
    return 0;
}
