/* Revocation: how soon a holder hears that someone else deleted its lock, and
 * what client tracking costs for --locks held locks (default 100 000).
 *
 *   dlock_bench revoke --url U [--locks 100000] [--watchdog-ms 15000] [--periods 1]
 *
 * The same holding is run twice, revocation off (renewal-time detection) and
 * on (CLIENT TRACKING redirected to the client's listener): the difference in
 * Redis's used_memory is the tracking table, the difference in commands is
 * what tracking adds (one renewal per hold taken, to have its key tracked; the
 * steady renewal rhythm is the same). Then, with tracking on, 200 of the held
 * locks are deleted one at a time from another connection and the time from
 * the DEL to the lost callback is measured. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "sync/hooks.h"

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lost_cv = PTHREAD_COND_INITIALIZER;
static long lost_n, lost_why[8];
static int64_t lost_at;

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    (void)reason;
    (void)ud;
    int64_t t = now_ns();
    pthread_mutex_lock(&lost_mu);
    lost_n++;
    lost_why[reason & 7]++;
    lost_at = t;
    pthread_cond_broadcast(&lost_cv);
    pthread_mutex_unlock(&lost_mu);
}

static void log_line(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    fprintf(stderr, "%.3f L%d %s\n", (double)now_ns() / 1e9, (int)level, msg);
}

typedef struct rv_arg {
    dlock_client *c;
    long from, to;
    const char *owner;
} rv_arg;

static void *rv_acquire(void *arg)
{
    rv_arg *a = arg;
    for (long i = a->from; i < a->to; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:rv:%ld", i);
        dlock_lock *l;
        if (dlock_lock_get_as(a->c, name, a->owner, &l) != DLOCK_OK ||
            dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK)
            die("acquire");
        dlock_lock_free(l);
    }
    return NULL;
}

static long long total_commands(redisContext *adm)
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

/* Redis's CPU time so far (user + system), ms. */
static double redis_cpu(redisContext *adm)
{
    redisReply *r = redisCommand(adm, "INFO cpu");
    double v = 0;
    const char *p;
    if (r && r->str && (p = strstr(r->str, "used_cpu_sys:")))
        v += atof(p + 13);
    if (r && r->str && (p = strstr(r->str, "used_cpu_user:")))
        v += atof(p + 14);
    if (r)
        freeReplyObject(r);
    return v * 1000.0;
}

typedef struct phase {
    double acquire_s, mem_bytes_per_lock, acquire_cmds_per_lock, cmds_per_period;
    double cpu_ms_per_period, acquire_cpu_ms;
    long long tracked_keys;
} phase;

/* Holds O.locks locks with revocation on or off; with it on, measures the
 * DEL-to-callback times into us[n]. */
static void run_phase(redisContext *adm, int on, phase *ph, int64_t *us, int n)
{
    freeReplyObject(redisCommand(adm, "FLUSHALL"));
    usleep(200000);
    long long mem0 = info_field(adm, "memory", "used_memory:");
    double rcpu0 = redis_cpu(adm);
    long long cmd0 = total_commands(adm);

    dlock_config *cfg = dlock_config_new();
    if (dlock_config_set_url(cfg, O.url) != DLOCK_OK)
        die("url");
    dlock_config_set_watchdog_timeout(cfg, O.watchdog_ms);
    dlock_config_set_pool_size(cfg, 16);
    dlock_config_set_revocation(cfg, on);
    dlock_config_set_lost_callback(cfg, on_lost, NULL);
    if (getenv("DLOCK_BENCH_LOG"))
        dlock_config_set_log_callback(cfg, log_line, NULL, DLOCK_LOG_INFO);
    dlock_client *c;
    if (dlock_client_open(&c, cfg) != DLOCK_OK)
        die("open");
    dlock_config_free(cfg);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(c, owner, sizeof(owner));

    enum { T = 8 };
    pthread_t th[T];
    rv_arg args[T];
    int64_t t0 = now_ns();
    for (int i = 0; i < T; i++) {
        args[i] = (rv_arg){c, O.locks * i / T, O.locks * (i + 1) / T, owner};
        pthread_create(&th[i], NULL, rv_acquire, &args[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    /* With tracking on, until every hold's first renewal answered. */
    while (on && dlock__hook_tracking(c) != 2 && now_ns() - t0 < 120000000000LL)
        usleep(1000);
    ph->acquire_s = (double)(now_ns() - t0) / 1e9;
    ph->acquire_cpu_ms = redis_cpu(adm) - rcpu0;
    if (getenv("DLOCK_BENCH_LOG"))
        fprintf(stderr, "revocation %s: %zu held after %.2f s, tracking %d, lost %ld %ld %ld %ld\n",
                on ? "on" : "off", dlock__hook_held(c), ph->acquire_s,
                dlock__hook_tracking(c), lost_why[1], lost_why[2], lost_why[3], lost_why[4]);
    long long cmd1 = total_commands(adm);
    long long mem1 = info_field(adm, "memory", "used_memory:");
    ph->tracked_keys = info_field(adm, "stats", "tracking_total_keys:");
    ph->mem_bytes_per_lock = (double)(mem1 - mem0) / (double)O.locks;
    ph->acquire_cmds_per_lock = (double)(cmd1 - cmd0) / (double)O.locks;

    /* Steady state: whole renewal periods. */
    usleep((useconds_t)(O.watchdog_ms * 1000 / 3 * 2));
    long long s0 = total_commands(adm);
    double c0 = redis_cpu(adm);
    int64_t w0 = now_ns();
    usleep((useconds_t)(O.watchdog_ms * 1000 / 3 * O.periods));
    long long s1 = total_commands(adm);
    double periods = (double)(now_ns() - w0) / 1e6 / ((double)O.watchdog_ms / 3.0);
    ph->cmds_per_period = (double)(s1 - s0) / periods;
    ph->cpu_ms_per_period = (redis_cpu(adm) - c0) / periods;
    if (getenv("DLOCK_BENCH_LOG"))
        fprintf(stderr, "after the steady state: %zu held, tracking %d, lost %ld %ld %ld %ld\n",
                dlock__hook_held(c), dlock__hook_tracking(c), lost_why[1],
                lost_why[2], lost_why[3], lost_why[4]);

    for (int k = 0; on && k < n; k++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:rv:%ld", (long)k * (O.locks / n));
        pthread_mutex_lock(&lost_mu);
        long before = lost_n;
        pthread_mutex_unlock(&lost_mu);
        int64_t a = now_ns();
        freeReplyObject(redisCommand(adm, "DEL %s", name));
        pthread_mutex_lock(&lost_mu);
        while (lost_n == before) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 5;
            if (pthread_cond_timedwait(&lost_cv, &lost_mu, &ts) != 0)
                break;
        }
        us[k] = lost_n > before ? (lost_at - a) / 1000 : -1;
        pthread_mutex_unlock(&lost_mu);
        if (us[k] < 0) {
            fprintf(stderr, "dlock_bench: no loss reported within 5 s of DEL %s (tracking %d, "
                            "%zu held, lost %ld %ld %ld %ld)\n", name,
                    dlock__hook_tracking(c), dlock__hook_held(c), lost_why[1],
                    lost_why[2], lost_why[3], lost_why[4]);
            exit(1);
        }
    }
    dlock_client_close(c);
    freeReplyObject(redisCommand(adm, "FLUSHALL"));
}

void revocation(void)
{
    redisContext *adm = admin();
    enum { N = 200 };
    int64_t us[N];
    phase off, on;
    run_phase(adm, 0, &off, NULL, 0);
    run_phase(adm, 1, &on, us, N);
    qsort(us, N, sizeof(us[0]), cmp_i64);
    printf("{\"peer\":\"dlock\",\"scenario\":\"revoke\",\"locks\":%ld,\"watchdog_ms\":%ld,"
           "\"samples\":%d,\"heard_us_median\":%lld,\"heard_us_p99\":%lld,\"heard_us_max\":%lld,"
           "\"renewal_period_ms\":%ld,"
           "\"tracking_bytes_per_lock\":%.0f,\"tracked_keys\":%lld,"
           "\"acquire_commands_per_lock_off\":%.2f,\"acquire_commands_per_lock_on\":%.2f,"
           "\"commands_per_period_off\":%.0f,\"commands_per_period_on\":%.0f,"
           "\"acquire_s_off\":%.2f,\"acquire_s_on\":%.2f,"
           "\"redis_cpu_ms_per_period_off\":%.0f,\"redis_cpu_ms_per_period_on\":%.0f,"
           "\"redis_acquire_cpu_ms_off\":%.0f,\"redis_acquire_cpu_ms_on\":%.0f}\n",
           O.locks, O.watchdog_ms, N, (long long)us[N / 2], (long long)us[N * 99 / 100],
           (long long)us[N - 1], O.watchdog_ms / 3,
           on.mem_bytes_per_lock - off.mem_bytes_per_lock, on.tracked_keys,
           off.acquire_cmds_per_lock, on.acquire_cmds_per_lock, off.cmds_per_period,
           on.cmds_per_period, off.acquire_s, on.acquire_s, off.cpu_ms_per_period,
           on.cpu_ms_per_period, off.acquire_cpu_ms, on.acquire_cpu_ms);
    redisFree(adm);
}
