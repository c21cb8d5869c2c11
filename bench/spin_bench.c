/* The spin lock (dlock_spin_lock_get) beside the pub/sub lock.
 *
 *   dlock_bench spin --url U [--names 10000] [--cycles 60] [--hold-ms 300]
 *       1. --names asynchronous waiters on as many names, each held by
 *          another client, once spin locks and once pub/sub locks: the
 *          channels subscribed on the server (PUBSUB CHANNELS matching the
 *          names), the pub/sub connections, and while they wait (over 3 s,
 *          the spin waiters at their 128 ms maximum back-off by then) the
 *          attempts per second (EVALSHA calls), per waiter, and every
 *          command Redis counts (a script's own calls included);
 *       2. --cycles handoffs of one lock between two threads, the holder
 *          keeping it --hold-ms (past the back-off's rise to its maximum):
 *          from the release's return to the waiter's acquisition, p50/p99,
 *          spin and pub/sub, against the back-off's bound (128 ms). */
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "dlock/async.h"

typedef int (*getter_as)(dlock_client *, const char *, const char *, dlock_lock **);

static atomic_long done_n;

static void on_acquired(const dlock_async_result *res, void *ud)
{
    dlock_lock *l = ud;
    if (dlock_async_status(res) == DLOCK_OK)
        dlock_lock_release_async(l, NULL, NULL);
    atomic_fetch_add(&done_n, 1);
}

static long long count_lines(redisContext *adm, const char *cmd)
{
    redisReply *r = redisCommand(adm, cmd);
    long long n = 0;
    if (r && r->type == REDIS_REPLY_STRING)
        for (const char *p = r->str; *p; p++)
            n += *p == '\n';
    else if (r && r->type == REDIS_REPLY_ARRAY)
        n = (long long)r->elements;
    if (r)
        freeReplyObject(r);
    return n;
}

typedef struct idle_fig {
    long long channels, pubsub;
    double attempts_per_s, commands_per_s, all_acquired_s;
} idle_fig;

typedef struct gap_fig {
    double p50_us, p99_us;
} gap_fig;

/* Part 1: n waiters of one kind on n held names. */
static void idle_waiters(const char *kind, getter_as get, long n, redisContext *adm,
                         idle_fig *f)
{
    dlock_client *hc = open_client(0, 2), *wc = open_client(0, 2);
    dlock_lock **held = malloc(sizeof(*held) * (size_t)n);
    dlock_lock **mine = malloc(sizeof(*mine) * (size_t)n);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(hc, owner, sizeof(owner));
    /* The holders: one owner, a 60 s lease (no renewals to count). */
    for (long i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:%s:%ld", kind, i);
        if (dlock_lock_get_as(hc, name, owner, &held[i]) != DLOCK_OK ||
            dlock_lock_try(held[i], 0, 60000) != DLOCK_OK)
            die("hold");
        char wo[DLOCK_OWNER_BUFSIZE];
        dlock_client_new_owner_id(wc, wo, sizeof(wo));
        if (get(wc, name, wo, &mine[i]) != DLOCK_OK)
            die("get");
    }
    long long channels0 = count_lines(adm, "PUBSUB CHANNELS *bench:*");
    long long pubsub0 = count_lines(adm, "CLIENT LIST TYPE pubsub");
    atomic_store(&done_n, 0);
    for (long i = 0; i < n; i++)
        if (dlock_lock_acquire_async(mine[i], &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER},
                                     on_acquired, mine[i]) != DLOCK_OK)
            die("acquire_async");
    sleep(3);   /* subscribed (pub/sub), at the maximum back-off (spin) */
    long long channels = count_lines(adm, "PUBSUB CHANNELS *bench:*") - channels0;
    long long pubsub = count_lines(adm, "CLIENT LIST TYPE pubsub") - pubsub0;
    long long c0 = all_commands(adm);
    long long e0 = info_field(adm, "commandstats", "cmdstat_evalsha:calls=");
    int64_t t0 = now_ns();
    sleep(3);
    long long c1 = all_commands(adm);
    long long e1 = info_field(adm, "commandstats", "cmdstat_evalsha:calls=");
    double secs = (double)(now_ns() - t0) / 1e9;
    double cps = (double)(c1 - c0) / secs;   /* a script's own calls counted too */
    double aps = e0 < 0 ? 0 : (double)(e1 - e0) / secs;
    int64_t r0 = now_ns();
    for (long i = 0; i < n; i++)
        dlock_lock_release(held[i]);
    while (atomic_load(&done_n) < n)
        usleep(1000);
    double rsecs = (double)(now_ns() - r0) / 1e9;
    *f = (idle_fig){channels, pubsub, aps, cps, rsecs};
    while (dlock_client_async_pending(wc) > 0)
        usleep(1000);
    dlock_client_close(wc);
    dlock_client_close(hc);
    for (long i = 0; i < n; i++) {
        dlock_lock_free(held[i]);
        dlock_lock_free(mine[i]);
    }
    free(held);
    free(mine);
}

/* Part 2: handoffs between two threads. */
typedef struct pair {
    dlock_lock *a, *b;
    long cycles;
    int64_t *gap;            /* ns: release returned -> acquisition returned */
    atomic_llong released_at;
    atomic_int turn;         /* 0: a holds next, 1: b */
} pair;

static void *pair_waiter(void *arg)
{
    pair *p = arg;
    for (long i = 0; i < p->cycles; i++) {
        while (atomic_load(&p->turn) != 1)
            usleep(100);
        if (dlock_lock_acquire(p->b, DLOCK_WATCHDOG) != DLOCK_OK)
            die("waiter acquire");
        p->gap[i] = now_ns() - atomic_load(&p->released_at);
        dlock_lock_release(p->b);
        atomic_store(&p->turn, 0);
    }
    return NULL;
}

static void handoffs(const char *kind, getter_as get, gap_fig *f)
{
    dlock_client *c = open_client(0, 2);
    pair p = {.cycles = O.cycles};
    p.gap = calloc((size_t)p.cycles, sizeof(int64_t));
    char name[64], oa[DLOCK_OWNER_BUFSIZE], ob[DLOCK_OWNER_BUFSIZE];
    snprintf(name, sizeof(name), "bench:%s:handoff", kind);
    dlock_client_new_owner_id(c, oa, sizeof(oa));
    dlock_client_new_owner_id(c, ob, sizeof(ob));
    if (get(c, name, oa, &p.a) != DLOCK_OK || get(c, name, ob, &p.b) != DLOCK_OK)
        die("get");
    pthread_t t;
    pthread_create(&t, NULL, pair_waiter, &p);
    for (long i = 0; i < p.cycles; i++) {
        while (atomic_load(&p.turn) != 0)
            usleep(100);
        if (dlock_lock_acquire(p.a, DLOCK_WATCHDOG) != DLOCK_OK)
            die("holder acquire");
        atomic_store(&p.turn, 1);
        usleep((useconds_t)O.hold_ms * 1000);   /* the waiter tries meanwhile */
        if (dlock_lock_release(p.a) != DLOCK_OK)
            die("release");
        atomic_store(&p.released_at, now_ns());
        while (atomic_load(&p.turn) != 0)
            usleep(100);
    }
    pthread_join(t, NULL);
    qsort(p.gap, (size_t)p.cycles, sizeof(int64_t), cmp_i64);
    f->p50_us = pct(p.gap, (size_t)p.cycles, 0.50);
    f->p99_us = pct(p.gap, (size_t)p.cycles, 0.99);
    dlock_lock_free(p.a);
    dlock_lock_free(p.b);
    dlock_client_close(c);
    free(p.gap);
}

void spin(void)
{
    long n = O.names ? O.names : 10000;
    if (!O.cycles || O.cycles > 1000)
        O.cycles = 60;
    if (!O.hold_ms)
        O.hold_ms = 300;
    redisContext *adm = admin();
    idle_fig is, ip;
    gap_fig gs, gp;
    idle_waiters("spin", dlock_spin_lock_get_as, n, adm, &is);
    idle_waiters("pubsub", dlock_lock_get_as, n, adm, &ip);
    handoffs("spin", dlock_spin_lock_get_as, &gs);
    handoffs("pubsub", dlock_lock_get_as, &gp);
    redisFree(adm);
    /* One line (bench/run.sh keeps a run's last). */
    printf("{\"peer\":\"dlock\",\"scenario\":\"spin\",\"waiters\":%ld,\"backoff_max_ms\":128,"
           "\"spin_channels\":%lld,\"spin_pubsub_connections\":%lld,"
           "\"spin_attempts_per_s_per_waiter\":%.2f,\"spin_redis_commands_per_s\":%.0f,"
           "\"spin_all_acquired_s\":%.2f,\"pubsub_channels\":%lld,"
           "\"pubsub_pubsub_connections\":%lld,\"pubsub_attempts_per_s_per_waiter\":%.2f,"
           "\"pubsub_all_acquired_s\":%.2f,\"cycles\":%ld,\"hold_ms\":%ld,"
           "\"spin_gap_p50_us\":%.0f,\"spin_gap_p99_us\":%.0f,\"pubsub_gap_p50_us\":%.0f,"
           "\"pubsub_gap_p99_us\":%.0f}\n",
           n, is.channels, is.pubsub, is.attempts_per_s / (double)n, is.commands_per_s,
           is.all_acquired_s, ip.channels, ip.pubsub, ip.attempts_per_s / (double)n,
           ip.all_acquired_s, O.cycles, O.hold_ms, gs.p50_us, gs.p99_us, gp.p50_us, gp.p99_us);
}
