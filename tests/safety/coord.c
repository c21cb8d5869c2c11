/* Safety harness coordinator: starts a lock Redis and a storage Redis, runs
 * worker processes, injects one kind of fault, then checks the histories.
 *
 *   safety [--scenario baseline|kill9|sigstop|restart|pause|partition|
 *                      sentinel-kill|cluster-failover|cluster-kill|replicated|replicated-lag|replicated-lag-quarantine|
 *                      replicated-lag-mixed|clock-jump|all]
 *          [--type lock|fair|rw|sem|latch|elect] [--seconds S] [--procs P] [--threads T]
 *          [--names K] [--ops N] [--watchdog MS] [--lock-delay MS] [--writer-first on|off] [--stop-spread] [--worker PATH] [--keep] [--ack]
 *          [--sentinel-failover]
 *
 * The failover scenarios (type lock) run the lock on a deployment instead of
 * one server (coord_deploy.c): sentinel-kill (a primary with 2 replicas and 3
 * sentinels; the primary SIGKILLed), cluster-failover (CLUSTER FAILOVER on
 * the replica of the primary serving the first name), cluster-kill (that
 * primary SIGKILLed), replicated (a primary with 2 replicas under
 * redis-replicated://, no Sentinel: the roles swapped with REPLICAOF after
 * the replicas caught up, writes paused meanwhile). --ack makes every acquisition and renewal wait for
 * every replica (DLOCK_ACK_RELEASE). They report the double grants seen.
 * clock-jump: the workers reach the lock server through a proxy that moves
 * its TIME answers forward by 1.5 s at each step, the coordinator cutting
 * every key's TTL by as much (the step's effect): it reports the steps
 * detected (a hold lost with cause "server clock jumped") and the double
 * grants (none allowed).
 *
 * --type picks the lock the workers use (safety.h): lock (the reentrant lock,
 * the default), fair (the fair lock; every waiter's slot FAIR_SLOT_MS, and the
 * checker also checks the order of acquisition) or rw (the read-write lock:
 * reads under the read lock, read-modify-writes under the write lock), sem
 * (the permit-expirable semaphore, SAFETY_SEM_PERMITS permits per name: the
 * checker counts the permits in use, and the coordinator times the return of
 * each permit a killed worker held) or latch (count-down latches the
 * coordinator sets, one per round, that the workers count down and await).
 * --writer-first on (type rw): the workers' read-write locks are writer-first
 * (dlock_config_set_writer_first), and no read hold may begin while a writer
 * waits (check_rw.c); off: the same holds of at least WF_HOLD_MS, Redisson's
 * rules, and the reads that began past a waiting writer counted, not failed.
 *
 * Exit 0 when no violation and every expectation held; 1 otherwise; 77 when a
 * scenario cannot run here (partition needs root for network namespaces).
 * Servers and workers are stopped by pid; the partition scenario lives in
 * network namespaces it creates and deletes. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"
#include "coord.h"
#include "harness.h"
#include "proxy.h"

typedef struct opts {
    const char *scenario;
    double seconds;
    int procs, threads, names;
    long long ops;
    int64_t watchdog, cmdtimeout;
    const char *worker_path;
    int keep;
    long long min_total_ops;   /* run the baseline again until this many operations */
    const char *report_path;   /* also write the report here */
    int type;                  /* safety_type */
    int ack;                   /* failover scenarios: every replica acknowledges */
    int64_t lock_delay;        /* --lock-delay MS: the workers' (every lock type), 0 none */
    int writer_first;          /* --writer-first on|off: type rw's handles writer-first (on)
                                  or not (off), holds of at least WF_HOLD_MS either way;
                                  -1 (absent): neither */
    int stop_spread;           /* --stop-spread: sigstop pauses 0, 0.5, ... 3 x the lease */
    int sentinel_failover;     /* --sentinel-failover: sentinel-kill's second failover made
                                  by a sentinel (SENTINEL FAILOVER), not logged by the
                                  coordinator: deploy_watch must see it */
    const char *dlock_path;    /* --dlock PATH: the command (type rate) */
} opts;

static opts O = {"all", 10, 3, 3, 2, 0, 1500, 500, NULL, 0, 0, NULL, SAFETY_LOCK, 0, 0, -1, 0, 0, NULL};

/* Type rate: each name's rate, RATE_N starts per RATE_INTERVAL_MS; a start's
 * stamp (the exec of dlock run's CMD) lags its grant by at most
 * RATE_STAMP_MS x th_slack(). */
#define RATE_N 4
#define RATE_INTERVAL_MS 2000
#define RATE_STAMP_MS 200

/* Failover scenarios: a lease that outlives a failover (down-after 1 s or a
 * node timeout of 2 s, then the election), so that a hold the new primary
 * has survives it. */
#define FAILOVER_WATCHDOG_MS 6000

/* clock-jump: the workers reach the lock server through a proxy
 * (tests/proxy.c) whose TIME answers the coordinator moves forward by
 * CLOCK_STEP_MS at each step, cutting every key's TTL on the server by as
 * much (the step's effect). A 6 s watchdog: a renewal pass every 2 s, and a
 * held key keeps at least 4 s, 2.5 s after the step: more than the pass
 * that sees it. Steps come a lease (the quarantine each one starts) and
 * CLOCK_GAP_MS apart. */
#define CLOCK_WATCHDOG_MS 6000
#define CLOCK_STEP_MS 1500
#define CLOCK_GAP_MS 3000
static th_proxy *clock_proxy;
static long long clock_shift_us;
/* Every key's TTL on the lock server cut by ARGV[1] ms (gone when none
 * would be left). */
#define CLOCK_STEP_LUA                                                   \
    "for _, k in ipairs(redis.call('keys', '*')) do\n"                   \
    "  local t = redis.call('pttl', k)\n"                                \
    "  if t > 0 then\n"                                                  \
    "    if t > tonumber(ARGV[1]) then\n"                                \
    "      redis.call('pexpire', k, t - tonumber(ARGV[1]))\n"            \
    "    else\n"                                                         \
    "      redis.call('del', k)\n"                                       \
    "    end\n"                                                          \
    "  end\n"                                                            \
    "end\n"                                                              \
    "return 1\n"

/* The fair lock's slot, every waiter's (the fair wait timeout, and the wait of
 * the waits that have a limit). A live waiter refreshes its place at least
 * every half slot: 1 s of scheduling slack on this noisy 2-core machine before
 * a live waiter could be dropped. A dead waiter at the head (a killed or
 * stopped worker's) delays the others by one slot at most once the lock is
 * free: the checker allows that much per such waiter. */
#define FAIR_SLOT_MS 2000
/* Fair order: a wait is clearly earlier than another when it began this much
 * before it. It covers the time from the W record to the first attempt
 * reaching Redis (a thread switch and one round trip on loopback: well under
 * 10 ms unless the machine stalls; the report shows the largest inversion
 * below the margin). */
#define FAIR_MARGIN_MS 50
/* Type fair: one hold in eight lasts this much longer, so that queues form
 * and waits outlast the margin (without it most waits of a fast scenario end
 * within a few ms, and no pair of them can be checked). */
#define FAIR_SLOW_HOLD_MS 100
/* Share of the rw operations done under the read lock. */
#define RW_READS_PERCENT 60
/* --writer-first: every hold at least this long (each worker holds half to
 * all of it), so that readers' holds overlap and writers wait among them. */
#define WF_HOLD_MS 200
/* --writer-first: a writer's first attempt (which records its intent) is
 * sent within this of its call (x th_slack); a read called later than that
 * and granted before the writer is a read past a waiting writer. */
#define WF_MARGIN_MS 25
static long long total_holds, total_violations;
static FILE *report_file;

static run *current;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

void coord_log(run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->log, fmt, ap);
    va_end(ap);
    fputc('\n', r->log);
    fflush(r->log);
}

/* -------------------------------------------------------------- workers */

/* A latch round every this many ms; an awaiter gives up after LATCH_WAIT_MS
 * (a round whose count-downer was killed or stopped never reaches zero). */
#define LATCH_ROUND_MS 300
#define LATCH_WAIT_MS 3000

/* The wait workers give: the fair lock's slot, or 4 x watchdog + 5 s. */
static int64_t worker_wait(void)
{
    return O.type == SAFETY_FAIR    ? FAIR_SLOT_MS
           : O.type == SAFETY_LATCH ? LATCH_WAIT_MS
                                    : O.watchdog * 4 + 5000;
}

static int worker_start(run *r, int id)
{
    worker *w = &r->w[id];
    char a[24][320];
    const server *lock = &r->lock, *store = &r->store;
    const char *lock_host = lock->host, *store_host = store->host;
    if (w->ns && strcmp(w->ns, r->ns_b) == 0)
        lock_host = store_host = NS_R_ADDR_B;
    snprintf(a[0], sizeof(a[0]), "%s", O.worker_path);
    snprintf(a[1], sizeof(a[1]), "id=%d", id);
    if (r->lock_url[0])
        snprintf(a[2], sizeof(a[2]), "lock=%.300s", r->lock_url);
    else
        snprintf(a[2], sizeof(a[2]), "lock=redis://%s:%d", lock_host, lock->port);
    snprintf(a[3], sizeof(a[3]), "store=redis://%s:%d", store_host, store->port);
    snprintf(a[4], sizeof(a[4]), "prefix=%s", r->prefix);
    snprintf(a[5], sizeof(a[5]), "names=%d", O.names);
    snprintf(a[6], sizeof(a[6]), "threads=%d", O.threads);
    snprintf(a[7], sizeof(a[7]), "history=%s/w%d.log", r->dir, id);
    snprintf(a[8], sizeof(a[8]), "shm=%s/shm", r->dir);
    snprintf(a[9], sizeof(a[9]), "watchdog=%lld", (long long)O.watchdog);
    snprintf(a[10], sizeof(a[10]), "cmdtimeout=%lld", (long long)O.cmdtimeout);
    snprintf(a[11], sizeof(a[11]), "hold_ms=%lld",
             (long long)(O.writer_first >= 0 && w->hold_ms < WF_HOLD_MS ? WF_HOLD_MS : w->hold_ms));
    snprintf(a[12], sizeof(a[12]), "wait=%lld", (long long)worker_wait());
    snprintf(a[13], sizeof(a[13]), "type=%s", safety_type_name(O.type));
    snprintf(a[14], sizeof(a[14]), "reads=%d", RW_READS_PERCENT);
    snprintf(a[15], sizeof(a[15]), "slow=%d", O.type == SAFETY_FAIR ? FAIR_SLOW_HOLD_MS : 0);
    snprintf(a[16], sizeof(a[16]), "permits=%d",   /* barrier: its parties */
             O.type == SAFETY_BARRIER ? O.procs * O.threads : SAFETY_SEM_PERMITS);
    snprintf(a[17], sizeof(a[17]), "ack=%d", r->ack);
    snprintf(a[18], sizeof(a[18]), "lockdelay=%lld", (long long)O.lock_delay);
    snprintf(a[19], sizeof(a[19]), "quarantine=%lld", (long long)w->quarantine);
    snprintf(a[20], sizeof(a[20]), "writerfirst=%d", O.writer_first == 1);
    int na = 21;
    if (O.type == SAFETY_RATE) {
        snprintf(a[na++], sizeof(a[0]), "dlock=%.300s", O.dlock_path);
        snprintf(a[na++], sizeof(a[0]), "rate=%d", RATE_N);
        snprintf(a[na++], sizeof(a[0]), "interval=%d", RATE_INTERVAL_MS);
    }
    char *argv[25];
    for (int i = 0; i < na; i++)
        argv[i] = a[i];
    argv[na] = NULL;
    char out[300];
    snprintf(out, sizeof(out), "%s/w%d.out", r->dir, id);
    w->pid = spawn(w->ns, argv, out);
    w->alive = w->pid > 0;
    return w->alive ? 0 : -1;
}

/* A worker with a thread in `phase`, or -1. */
static int find_worker(run *r, int phase, int only)
{
    int start = rand() % r->nworkers;
    for (int k = 0; k < r->nworkers; k++) {
        int id = (start + k) % r->nworkers;
        if (!r->w[id].alive || (only >= 0 && id != only))
            continue;
        for (int t = 0; t < O.threads; t++)
            if (r->shm->slot[id][t].phase == phase && r->shm->slot[id][t].pid == r->w[id].pid)
                return id;
    }
    return -1;
}

static long long total_ops(run *r)
{
    long long n = 0;
    for (int id = 0; id < r->nworkers; id++)
        for (int t = 0; t < O.threads; t++)
            n += r->shm->slot[id][t].ops;
    return n;
}

/* A live thread with no progress for this long is stuck: the longest wait,
 * plus every retry of a call, plus margin. */
static void check_stuck(run *r, int64_t now, int except)
{
    int64_t limit = (O.watchdog * 4 + 5000 + 3 * (O.cmdtimeout + 200) * 3 + 5000) * 1000000LL;
    if (O.type == SAFETY_FAIR)   /* waits without limit: a thread's turn comes */
        limit += (int64_t)FAIR_SLOT_MS * SAFETY_MAX_THREADS * 1000000LL;
    for (int id = 0; id < r->nworkers; id++) {
        if (!r->w[id].alive || id == except)
            continue;
        for (int t = 0; t < O.threads; t++) {
            safety_slot *s = &r->shm->slot[id][t];
            if (s->pid == r->w[id].pid && s->progress && now - s->progress > limit) {
                fprintf(stderr, "  problem: worker %d thread %d stuck for %.1f s (phase %d)\n", id,
                        t, (now - s->progress) / 1e9, s->phase);
                r->stuck++;
                s->progress = now;   /* report once per stall */
            }
        }
    }
}

/* ------------------------------------------------------------- scenarios */

typedef struct scenario {
    const char *name;
    int64_t hold_ms;        /* critical-section length (0: as fast as possible) */
    int64_t victim_hold_ms; /* worker 0's, for sigstop/partition */
    int needs_netns;
    int names;              /* lock names, 0 = --names */
    int deploy;             /* DEPLOY_*: a failover scenario's deployment */
    int64_t quarantine;     /* the workers' failover quarantine: 0 off, -1 auto, else ms */
} scenario;

/* Type fair: the other threads of a stopped worker may wait at the head of
 * the queue of the name it holds, each delaying the others by one slot once
 * the lock is free. A stop outlasts that too, so that the lock passes on. */
static int64_t dead_waiters_ms(void)
{
    return O.type == SAFETY_FAIR ? (int64_t)(O.threads - 1) * FAIR_SLOT_MS : 0;
}

/* restart: holds longer than a restart, so new holders meet old ones (the
 * overlaps Redis without persistence allows). pause: more names than threads
 * can keep busy, so acquires (not just waits) run into the pause. */
static const scenario scenarios[] = {
    {"baseline", 0, 0, 0, 0, 0, 0},    {"kill9", 2, 2, 0, 0, 0, 0},  {"sigstop", 5, 300, 0, 0, 0, 0},
    {"restart", 400, 400, 0, 0, 0, 0}, {"pause", 2, 2, 0, 6, 0, 0},  {"partition", 2, 4000, 1, 0, 0, 0},
    /* Failovers (type lock only): holds long enough to be in progress at the
     * switch. */
    {"sentinel-kill", 20, 20, 0, 0, DEPLOY_SENTINEL_KILL, 0},
    {"cluster-failover", 20, 20, 0, 0, DEPLOY_CLUSTER_FAILOVER, 0},
    {"cluster-kill", 20, 20, 0, 0, DEPLOY_CLUSTER_KILL, 0},
    {"replicated", 20, 20, 0, 0, DEPLOY_REPLICATED, 0},
    /* A replica that lags, promoted: the grants it missed are lost. Holds of
     * 1 s, so that some are in progress at the switch: without a quarantine
     * another worker is granted the lock on the new primary while the first
     * still holds (the hole Redisson leaves); with it (auto: the watchdog
     * timeout), nobody is until the first holder has been told. */
    {"replicated-lag", 1000, 1000, 0, 6, DEPLOY_REPLICATED_LAG, 0},
    {"replicated-lag-quarantine", 1000, 1000, 0, 6, DEPLOY_REPLICATED_LAG, -1},
    /* The quarantine is the server's: one worker with it (auto), the others
     * without, and one more without started after each switch. The first
     * to see the switch records it on the new primary; every acquisition
     * there honours it. */
    {"replicated-lag-mixed", 1000, 1000, 0, 6, DEPLOY_REPLICATED_LAG, QUARANTINE_MIXED},
    /* The lock server's clock steps forward (through a proxy): holds of 3 s,
     * renewed at least once, so that the watchdog samples TIME around each
     * step. */
    {"clock-jump", 3000, 3000, 0, 0, 0, 0},
};

static int64_t run_slack;

/* Mixed quarantine: the first failover waits (at most 10 s x th_slack)
 * until the quarantined worker has armed the record of every lock name's
 * slot on the primary (its acquisitions do) and the replicas have it: the
 * guarantee under test is for a lock that client has used before the
 * switch; one armed during the lag would be missing on the promoted
 * replica (a busy machine delayed its first hold of a name past the
 * failover, and the run counted double grants in slots nobody armed).
 * Always 1: the failover goes ahead either way. */
static int armed_records(int deploy, const char *key)
{
    int64_t until = safety_now() + 10000000000LL * run_slack;
    int seen = 0;
    while (!interrupted && safety_now() < until) {
        redisContext *c = deploy_admin(deploy, key);
        redisReply *x = c ? redisCommand(c, "KEYS dlock_quarantine:*") : NULL;
        seen = x && x->type == REDIS_REPLY_ARRAY ? (int)x->elements : 0;
        if (x)
            freeReplyObject(x);
        if (c)
            redisFree(c);
        if (seen >= O.names)
            break;
        msleep(50);
    }
    if (seen < O.names)
        fprintf(stderr, "  note: %d of %d names' quarantine records armed before the first "
                        "failover\n", seen, O.names);
    msleep(300);   /* replicated (loopback: a few ms) */
    return 1;
}

/* The scenarios type rate runs: its starts are checked against one
 * server's grants (no hold to stop, cut off or fail over). */
static int rate_scenario(const char *name)
{
    return !strcmp(name, "baseline") || !strcmp(name, "kill9") || !strcmp(name, "pause") ||
           !strcmp(name, "restart");
}

/* Type sem: when each permit killed worker `id` held is back in the pool
 * (its lease over by the server's clock, or given back), polled every 20 ms
 * for up to 10 s; one X record per permit. */
#define PERMIT_BACK_LUA                                                              \
    "local s = redis.call('zscore', KEYS[1], ARGV[1])\n"                              \
    "if not s then return 1 end\n"                                                   \
    "local t = redis.call('time')\n"                                                 \
    "if tonumber(s) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then\n" \
    "  return 1\n"                                                                   \
    "end\n"                                                                          \
    "return 0\n"

static void time_dead_permits(run *r, int id, pid_t pid, int64_t t_kill)
{
    redisContext *c = admin(&r->lock);
    for (int t = 0; c && t < O.threads; t++) {
        safety_slot *s = &r->shm->slot[id][t];
        if (s->pid != pid || (s->phase != PH_HOLDING && s->phase != PH_WRITTEN))
            continue;
        unsigned char raw[16];
        int ok = 1;
        for (int i = 0; i < 16 && ok; i++) {
            unsigned v;
            ok = sscanf((const char *)s->permit + 2 * i, "%2x", &v) == 1;
            raw[i] = (unsigned char)v;
        }
        if (!ok)
            continue;
        char leases[160];
        snprintf(leases, sizeof(leases), "{%s:sem:%d}:timeout", r->prefix, (int)s->name);
        int64_t back = -1;
        while (back < 0 && safety_now() - t_kill < 10000000000LL) {
            const char *argv[] = {"EVAL", PERMIT_BACK_LUA, "1", leases, (const char *)raw};
            size_t lens[] = {4, strlen(PERMIT_BACK_LUA), 1, strlen(leases), 16};
            redisReply *rep = redisCommandArgv(c, 5, argv, lens);
            if (rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1)
                back = safety_now();
            if (rep)
                freeReplyObject(rep);
            else
                break;
            if (back < 0)
                msleep(20);
        }
        coord_log(r, "X %d %d %lld %lld", id, (int)s->name, (long long)t_kill, (long long)back);
    }
    if (c)
        redisFree(c);
}

/* Type latch: a new round every LATCH_ROUND_MS. The latch is set (SET NX, a
 * fresh name: Redisson's trySetCount on an absent latch) before the round is
 * announced to the workers, and the L record written before that. */
static void latch_tick(run *r, const scenario *sc, int64_t now)
{
    static int64_t next_round;
    static redisContext *single;
    if (now < next_round)
        return;
    next_round = now + LATCH_ROUND_MS * 1000000LL;
    int64_t round = r->shm->latch_round + 1;
    char name[128], cnt[16];
    snprintf(name, sizeof(name), "%s:latch:%lld", r->prefix, (long long)round);
    /* On a deployment: the node serving the latch now (a connection each
     * round: failovers move it). */
    redisContext *c = sc->deploy ? deploy_admin(sc->deploy, name) : single;
    if (!sc->deploy && (!c || c->err)) {
        if (c)
            redisFree(c);
        c = single = admin(&r->lock);
    }
    if (!c)
        return;
    int alive = 0;
    for (int id = 0; id < r->nworkers; id++)
        alive += r->w[id].alive;
    int count = (alive * O.threads) / 3;   /* a third count down, the others await */
    if (count < 1)
        count = 1;
    snprintf(cnt, sizeof(cnt), "%d", count);
    const char *argv[] = {"SET", name, cnt, "NX"};
    redisReply *rep = redisCommandArgv(c, 4, argv, NULL);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    /* The latch is the test's own setup: on a deployment every replica has
     * it before the round is announced, so that no failover can lose it (an
     * absent latch is open, and its awaiters would be released early). */
    if (ok && sc->deploy) {
        rep = redisCommand(c, "WAIT %d 2000", deploy_replicas(sc->deploy));
        ok = rep && rep->type == REDIS_REPLY_INTEGER &&
             rep->integer >= deploy_replicas(sc->deploy);
        if (rep)
            freeReplyObject(rep);
    }
    if (sc->deploy)
        redisFree(c);
    if (!ok)
        return;
    coord_log(r, "L %lld %lld %d", (long long)round, (long long)safety_now(), count);
    int idx = (int)(round % SAFETY_LATCH_ROUNDS);
    r->shm->latch_count[idx] = count;
    __atomic_store_n(&r->shm->latch_tickets[idx], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&r->shm->latch_round, round, __ATOMIC_SEQ_CST);
}

/* The highest th_slack() seen while a scenario ran: the checker's margins
 * for scheduling (a waiter woken late, an attempt that reached Redis late)
 * are multiplied by it, as every timing bound of the tests is. */

static void inject(run *r, const scenario *sc, int64_t until)
{
    int64_t next = safety_now() + 1500000000LL;
    run_slack = th_slack();
    while (!interrupted && safety_now() < until) {
        int64_t s = th_slack();
        if (s > run_slack)
            run_slack = s;
        if (O.ops && total_ops(r) >= O.ops)
            break;
        int64_t now = safety_now();
        check_stuck(r, now, -1);
        if (O.type == SAFETY_LATCH)
            latch_tick(r, sc, now);
        if (now < next) {
            if (sc->deploy)
                deploy_watch(r, sc->deploy);
            msleep(20);
            continue;
        }
        next = now + (1000 + rand() % 1000) * 1000000LL;
        if (sc->deploy) {
            /* A failover once the workers are busy; on a cluster, of the
             * primary that serves the first lock name. Another after 6 s
             * where the deployment can take one (not after a cluster kill:
             * the promoted replica has none left). */
            char key[96];
            snprintf(key, sizeof(key), "%s:%s:0", r->prefix, O.type == SAFETY_SEM ? "sem" : "lock");
            if (r->failovers > 0 && sc->deploy == DEPLOY_CLUSTER_KILL) {
                next = until;
                continue;
            }
            if (O.sentinel_failover && r->failovers == 1 && !r->unasked &&
                sc->deploy == DEPLOY_SENTINEL_KILL) {
                /* As the sentinels do on their own: the coordinator logs
                 * nothing, its watch must (deploy_watch), within 15 s. */
                int64_t t = safety_now();
                if (deploy_sentinel_failover() == 0)
                    r->unasked++;
                else
                    fprintf(stderr, "  problem: SENTINEL FAILOVER was refused\n");
                while (r->seen_unasked < r->unasked && safety_now() - t < 15000000000LL &&
                       !interrupted) {
                    deploy_watch(r, sc->deploy);
                    msleep(20);
                }
            } else if ((sc->quarantine != QUARANTINE_MIXED || r->failovers > 0 ||
                        armed_records(sc->deploy, key)) &&
                       deploy_failover(r, sc->deploy, key) == 0) {
                r->failovers++;
                if (sc->quarantine == QUARANTINE_MIXED && r->nworkers < SAFETY_MAX_WORKERS) {
                    /* A client that starts after the switch: it never sees it. */
                    int nid = r->nworkers++;
                    r->w[nid].ns = NULL;
                    r->w[nid].hold_ms = sc->hold_ms;
                    r->w[nid].quarantine = 0;
                    worker_start(r, nid);
                }
            } else
                fprintf(stderr, "  problem: the failover could not be made\n");
            next = safety_now() + 6000000000LL;
        } else if (!strcmp(sc->name, "kill9")) {
            int id = find_worker(r, PH_HOLDING, -1);
            if (id < 0 && O.type == SAFETY_LATCH)   /* between rounds: anyone */
                id = find_worker(r, PH_IDLE, -1);
            if (id < 0 && O.type == SAFETY_BARRIER)   /* a party gathering */
                id = find_worker(r, PH_WAITING, -1);
            if (id < 0) {
                /* Nobody holds this instant (short holds, a spin lock's
                 * waiters asleep on their back-off): look again soon, not
                 * at the next 1-2 s turn (3 runs without a kill failed). */
                next = now + 20000000LL;
                continue;
            }
            pid_t pid = r->w[id].pid;
            kill(pid, SIGKILL);
            int64_t t_kill = safety_now();
            coord_log(r, "K %d %d %lld", id, (int)pid, (long long)t_kill);
            waitpid(pid, NULL, 0);
            r->w[id].alive = 0;
            if (O.type == SAFETY_SEM)
                time_dead_permits(r, id, pid, t_kill);
            if (r->nworkers < SAFETY_MAX_WORKERS) {   /* a replacement */
                int nid = r->nworkers++;
                r->w[nid].ns = NULL;
                r->w[nid].hold_ms = sc->hold_ms;
                r->w[nid].quarantine = r->w[id].quarantine;
                worker_start(r, nid);
            }
        } else if (!strcmp(sc->name, "sigstop")) {
            int id = find_worker(r, PH_HOLDING, 0);
            if (id < 0) {
                next = now + 20000000LL;
                continue;
            }
            pid_t pid = r->w[id].pid;
            /* The stop's time is taken once the signal is sent: taken before,
             * a controller preempted between the two let the worker release
             * (and record its hold's end after that time) before it stopped,
             * and the check took that hold for a paused one. */
            kill(pid, SIGSTOP);
            int64_t t_stop = safety_now();
            /* Longer than its lease; or, with --stop-spread, k/2 x the lease
             * for the k-th stop's k = 0..6 in turn (0 to 3 x: a pause shorter
             * than the lease loses nothing, one longer does). */
            static int spread_k;
            int64_t pause_ms = O.stop_spread ? O.watchdog * (spread_k++ % SAFETY_SPREAD_STEPS) / 2
                                             : O.watchdog + 1000 + dead_waiters_ms();
            msleep(pause_ms);
            int64_t t_cont = safety_now();
            kill(pid, SIGCONT);
            coord_log(r, "P %d %d %lld %lld", id, (int)pid, (long long)t_stop, (long long)t_cont);
            next = safety_now() + 1500000000LL;
        } else if (!strcmp(sc->name, "restart")) {
            int64_t t_down = safety_now();
            kill(r->lock.pid, SIGKILL);
            waitpid(r->lock.pid, NULL, 0);
            msleep(100);
            if (server_launch(r, &r->lock) != 0)
                break;
            coord_log(r, "R %lld %lld", (long long)t_down, (long long)safety_now());
            next = safety_now() + 2500000000LL;
        } else if (!strcmp(sc->name, "pause")) {
            int64_t pause_ms = O.cmdtimeout * 3;   /* longer than the command timeout */
            redisContext *c = admin(&r->lock);
            if (!c)
                continue;
            int64_t t = safety_now();
            redisReply *rep = redisCommand(c, "CLIENT PAUSE %lld ALL", (long long)pause_ms);
            if (rep)
                freeReplyObject(rep);
            redisFree(c);
            msleep(pause_ms);
            coord_log(r, "C %lld %lld", (long long)t, (long long)(t + pause_ms * 1000000LL));
            next = safety_now() + 2000000000LL;
        } else if (!strcmp(sc->name, "clock-jump")) {
            /* A step needs a renewal pass (a third of the lease) and two
             * seconds after it, within the run, to be seen. */
            if (until - now < (O.watchdog / 3 + 2000) * 1000000LL) {
                next = until;
                continue;
            }
            redisContext *c = admin(&r->lock);
            if (!c)
                continue;
            int64_t t = safety_now();
            clock_shift_us += CLOCK_STEP_MS * 1000LL;
            th_proxy_shift_time(clock_proxy, clock_shift_us);
            char step[24];
            snprintf(step, sizeof(step), "%d", CLOCK_STEP_MS);
            redisReply *rep = redisCommand(c, "EVAL %s 0 %s", CLOCK_STEP_LUA, step);
            if (rep)
                freeReplyObject(rep);
            redisFree(c);
            coord_log(r, "J %lld %lld", (long long)t, (long long)safety_now());
            next = safety_now() + (O.watchdog + CLOCK_GAP_MS) * 1000000LL;
        } else if (!strcmp(sc->name, "partition")) {
            int id = find_worker(r, PH_HOLDING, 0);   /* worker 0 lives in namespace A */
            if (id != 0) {
                next = now + 20000000LL;
                continue;
            }
            if (partition(r, 1) != 0) {
                fprintf(stderr, "safety: iptables failed; partition not injected\n");
                break;
            }
            int64_t t_cut = safety_now();
            for (int64_t t = 0; t < O.watchdog + 2000 && !interrupted; t += 100) {
                msleep(100);
                check_stuck(r, safety_now(), 0);
            }
            partition(r, 0);
            coord_log(r, "N %d %lld %lld", 0, (long long)t_cut, (long long)safety_now());
            next = safety_now() + 2000000000LL;
        }
    }
}

static int read_storage(run *r, check_params *cp)
{
    redisContext *c = admin(&r->store);
    if (!c)
        return -1;
    for (int k = 0; k < O.names; k++) {
        const char *suffix[3] = {"value", "accepted", "refused"};
        long long *dst[3] = {&cp->value[k], &cp->accepted[k], &cp->refused[k]};
        for (int i = 0; i < 3; i++) {
            redisReply *rep = redisCommand(c, "GET %s:guard:%d:%s", r->prefix, k, suffix[i]);
            *dst[i] = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
            if (rep)
                freeReplyObject(rep);
        }
    }
    redisFree(c);
    cp->storage_ok = 1;
    return 0;
}

static int run_scenario(const scenario *sc)
{
    int names_option = O.names;
    int64_t watchdog_option = O.watchdog;
    if (sc->names)
        O.names = sc->names;
    if (sc->deploy && O.watchdog < FAILOVER_WATCHDOG_MS)
        O.watchdog = FAILOVER_WATCHDOG_MS;
    const int clock = !strcmp(sc->name, "clock-jump");
    if (clock && O.watchdog < CLOCK_WATCHDOG_MS)
        O.watchdog = CLOCK_WATCHDOG_MS;
    run rr;
    run *r = &rr;
    memset(r, 0, sizeof(*r));
    current = r;
    r->scenario = sc->name;
    snprintf(r->dir, sizeof(r->dir), "/tmp/dlock-safety-%s-%s-XXXXXX", safety_type_name(O.type),
             sc->name);
    if (!mkdtemp(r->dir))
        return 1;
    snprintf(r->prefix, sizeof(r->prefix), "safety:%d", (int)getpid());
    char path[sizeof(r->dir) + 32];
    snprintf(path, sizeof(path), "%.255s/coord.log", r->dir);
    r->log = fopen(path, "w");
    snprintf(path, sizeof(path), "%.255s/shm", r->dir);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (!r->log || fd < 0 || ftruncate(fd, sizeof(safety_shm)) != 0)
        return 1;
    r->shm = mmap(NULL, sizeof(safety_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r->shm == MAP_FAILED)
        return 1;

    const char *ns_servers = NULL;
    const char *host = "127.0.0.1";
    if (sc->needs_netns) {
        if (geteuid() != 0 || netns_up(r) != 0 || sh("command -v iptables >/dev/null") != 0) {
            printf("scenario %-10s SKIPPED: needs root, network namespaces and iptables\n",
                   sc->name);
            netns_down(r);
            return 77;
        }
        ns_servers = r->ns_r;
        host = NS_R_ADDR;
    }
    if (server_start(r, &r->store, "store", ns_servers, host) != 0 ||
        (sc->deploy ? deploy_start(sc->deploy, r->lock_url, sizeof(r->lock_url))
                    : server_start(r, &r->lock, "lock", ns_servers, host)) != 0) {
        if (r->store.pid > 0)
            stop_pid(r->store.pid, SIGTERM, 3000);
        netns_down(r);
        O.names = names_option;
        O.watchdog = watchdog_option;
        return 1;
    }
    if (sc->deploy && O.ack)
        r->ack = deploy_replicas(sc->deploy);
    if (clock) {
        clock_shift_us = 0;
        if (!(clock_proxy = th_proxy_start(r->lock.port))) {
            stop_pid(r->lock.pid, SIGTERM, 3000);
            stop_pid(r->store.pid, SIGTERM, 3000);
            O.watchdog = watchdog_option;
            return 1;
        }
        snprintf(r->lock_url, sizeof(r->lock_url), "redis://127.0.0.1:%d",
                 th_proxy_port(clock_proxy));
    }
    r->quarantine = sc->quarantine;
    r->nworkers = O.procs;
    for (int id = 0; id < r->nworkers; id++) {
        r->w[id].hold_ms = id == 0 ? sc->victim_hold_ms : sc->hold_ms;
        r->w[id].quarantine = sc->quarantine != QUARANTINE_MIXED ? sc->quarantine
                              : id == 0                           ? -1
                                                                  : 0;
        if (id == 0 && sc->needs_netns)   /* the cut-off hold outlasts its own waiters too */
            r->w[id].hold_ms += dead_waiters_ms();
        r->w[id].ns = sc->needs_netns ? (id == 0 ? r->ns_a : r->ns_b) : NULL;
        worker_start(r, id);
    }
    r->t0 = safety_now();
    inject(r, sc, r->t0 + (int64_t)(O.seconds * 1e9));
    int64_t run_end = safety_now();
    for (int id = 0; id < r->nworkers; id++)
        if (r->w[id].alive)
            kill(r->w[id].pid, SIGTERM);
    for (int id = 0; id < r->nworkers; id++)
        if (r->w[id].alive) {
            /* A worker that does not finish in time counts as stuck. */
            int done = 0, status = 0;
            for (int i = 0; i < 3000 && !done; i++) {
                if (waitpid(r->w[id].pid, &status, WNOHANG) == r->w[id].pid)
                    done = 1;
                else
                    msleep(10);
                /* Again every second: a replacement started just now may have
                 * taken the first between fork and exec (where the handler
                 * inherited from us swallows it). */
                if (i % 100 == 99)
                    kill(r->w[id].pid, SIGTERM);
            }
            if (!done) {
                fprintf(stderr, "  problem: worker %d did not stop within 30 s\n", id);
                r->stuck++;
                stop_pid(r->w[id].pid, SIGKILL, 1000);
            } else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM) {
                /* A crash (the library's or the worker's): its holds never
                 * ended, and would pass as lost ones. */
                printf("  problem: worker %d died of signal %d (%s)\n", id, WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
                r->crashed++;
            } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
                printf("  problem: worker %d exited with status %d\n", id, WEXITSTATUS(status));
                r->crashed++;
            }
        }
    double seconds = (run_end - r->t0) / 1e9;

    check_params cp;
    memset(&cp, 0, sizeof(cp));
    cp.dir = r->dir;
    cp.names = O.names;
    cp.watchdog_ns = O.watchdog * 1000000LL;
    /* auto: the watchdog timeout (the workers' leases are shorter); a clock
     * step's: a lease. */
    cp.quarantine_ns = (sc->quarantine < 0 || clock ? O.watchdog : sc->quarantine) * 1000000LL;
    if (sc->deploy == DEPLOY_REPLICATED_LAG)
        cp.lost_release_ns = O.watchdog * 1000000LL;
    cp.blocked_ns = 2000000000LL * run_slack;
    cp.free_slack_ns = 1000000000LL * run_slack;
    cp.run_end = run_end;
    cp.type = O.type;
    cp.permits = SAFETY_SEM_PERMITS;
    cp.writer_first = O.writer_first == 1;
    cp.wf_margin_ns = (O.writer_first >= 0 ? WF_MARGIN_MS : 1000) * 1000000LL * run_slack;
    cp.rate = RATE_N;
    cp.parties = O.procs * O.threads;
    cp.revoke_margin_ns = 200 * 1000000LL * run_slack;
    cp.interval_ns = RATE_INTERVAL_MS * 1000000LL;
    cp.stamp_slack_ns = RATE_STAMP_MS * 1000000LL * run_slack;
    cp.slot_ns = (int64_t)FAIR_SLOT_MS * 1000000LL;
    cp.fair_margin_ns = (int64_t)FAIR_MARGIN_MS * 1000000LL * run_slack;
    /* A call that meets a connection the fault broke fails within the command
     * timeout and is retried after the retry delay (200 ms) on a new one (an
     * idle pooled connection is checked before use: a dead one is dropped
     * unused). */
    cp.recover_ns = (O.cmdtimeout + 200) * 1000000LL * run_slack;
    read_storage(r, &cp);
    if (sc->deploy)
        deploy_stop(sc->deploy);
    else
        stop_pid(r->lock.pid, SIGTERM, 3000);
    if (clock_proxy) {
        th_proxy_stop(clock_proxy);
        clock_proxy = NULL;
    }
    stop_pid(r->store.pid, SIGTERM, 3000);
    netns_down(r);
    fclose(r->log);
    check_report rep;
    int bad = safety_check(&cp, &rep);
    const int lag = sc->deploy == DEPLOY_REPLICATED_LAG;
    const long long doubles = rep.overlaps + rep.allowed_overlaps;
    /* Without a quarantine the lagging replica's double grants, and what
     * they do to the guarded data (lost updates, fencing tokens that go
     * back), are what the scenario measures: counted, not failed. */
    const long long hole = lag && !sc->quarantine
                               ? rep.overlaps + rep.lost_updates + rep.token_regressions
                               : 0;
    bad -= (int)hole;
    safety_print_report(sc->name, &cp, &rep, seconds, stdout);
    if (report_file)
        safety_print_report(sc->name, &cp, &rep, seconds, report_file);
    total_holds += O.type == SAFETY_LATCH    ? rep.latch_countdowns + rep.latch_awaits
                   : O.type == SAFETY_BARRIER ? rep.bar_enters + rep.bar_leaves
                   : O.type == SAFETY_RATE ? rep.rate_starts
                                           : rep.holds;
    total_violations += safety_violations(&rep);
    if (r->stuck)
        printf("  stuck workers: %d\n", r->stuck);
    if (run_slack > 1)
        printf("  a busy machine: the checker's scheduling margins x%lld (th_slack)\n",
               (long long)run_slack);
    fflush(stdout);
    int latch = O.type == SAFETY_LATCH || O.type == SAFETY_BARRIER;   /* no holds: rounds */
    int ok = bad == 0 && r->stuck == 0 && r->crashed == 0 &&
             (rep.holds > 0 || latch || rep.rate_starts > 0);
    /* --stop-spread with a lock-delay covering the longest pause past the
     * lease (3 x - 1 x) and a second to be told: no next holder may begin
     * before a paused holder's lost callback. */
    if (!strcmp(sc->name, "sigstop") && O.stop_spread &&
        O.lock_delay >= 2 * O.watchdog + 1000 && rep.stop_before_told > 0) {
        printf("  FAIL: %lld next holds began before the paused holder's lost callback, with a "
               "lock-delay of %lld ms\n", rep.stop_before_told, (long long)O.lock_delay);
        ok = 0;
    }
    /* Each fault must have been injected and had its effect at least once
     * (else the checks could not fail): a run where it had none, and
     * nothing else failed, is played again (main, up to 3 times). */
    int effect = 1;
    if (!strcmp(sc->name, "kill9") && rep.kills == 0)
        effect = 0;
    if (!strcmp(sc->name, "sigstop") &&
        (latch ? rep.stops == 0
               : rep.stop_holds == 0 || (O.lock_delay == 0 && rep.stop_passed == 0)))
        effect = 0;
    if (!strcmp(sc->name, "restart") && rep.restarts == 0)
        effect = 0;
    if (!strcmp(sc->name, "pause") && rep.pauses == 0)
        effect = 0;
    if (!strcmp(sc->name, "partition") &&
        (latch ? rep.partitions == 0
               : rep.part_holds == 0 || rep.others_during_partition == 0))
        effect = 0;
    /* The limit must have been reached (else the check could not fail); a
     * killed holder's permit must have been timed. */
    if (O.type == SAFETY_SEM && rep.sem_max_in_use < SAFETY_SEM_PERMITS)
        ok = 0;
    if (O.type == SAFETY_SEM && !strcmp(sc->name, "kill9") && rep.sem_permits_back == 0)
        ok = 0;
    /* The rate must have been reached (else the check could not fail). */
    if (O.type == SAFETY_RATE && rep.rate_max_in_window < RATE_N) {
        printf("  the rate was never reached: at most %lld starts in one checked window\n",
               rep.rate_max_in_window);
        ok = 0;
    }
    /* Latches must have been released, with awaiters. */
    if (O.type == SAFETY_LATCH && rep.latch_released == 0)
        ok = 0;
    /* Readers must have shared, and writers written; writer-first: a writer
     * must have waited among readers (else the check could not fail). */
    if (O.type == SAFETY_RW && (rep.read_overlaps == 0 || rep.write_holds == 0))
        ok = 0;
    if (O.type == SAFETY_RW && O.writer_first >= 0 && rep.wf_waits == 0)
        ok = 0;
    /* Requests must have been heard (else the check could not fail). */
    if (O.type == SAFETY_REVOKE && rep.rv_heard == 0)
        ok = 0;
    /* Barrier rounds must have been checked (else the check could not fail). */
    if (O.type == SAFETY_BARRIER && rep.bar_rounds - rep.bar_reset == 0)
        ok = 0;
    /* Hand-overs must have been adopted (else the check could not fail). */
    if (O.type == SAFETY_HANDOVER && rep.handovers_adopted == 0)
        ok = 0;
    /* A failover must have been made; with every replica acknowledging, a
     * clean one (CLUSTER FAILOVER waits for the replica) grants no lock twice. */
    if (sc->deploy) {
        printf("  failovers: %d (replica acknowledgement: %s); double grants: %lld, of which "
               "%lld with the first holder told (fencing refused its late writes) and %lld "
               "violations\n",
               r->failovers, r->ack ? "every replica" : "off",
               rep.overlaps + rep.allowed_overlaps, rep.allowed_overlaps, rep.overlaps);
        if (report_file)
            fprintf(report_file, "  failovers: %d (replica acknowledgement: %s); double grants: "
                                 "%lld (%lld told)\n",
                    r->failovers, r->ack ? "every replica" : "off",
                    rep.overlaps + rep.allowed_overlaps, rep.allowed_overlaps);
        if (r->failovers == 0)
            ok = 0;
        /* Every failover is a fault window: one the sentinels made alone
         * too (deploy_watch), else the checker blames its losses on the lock. */
        if (r->seen_unasked < r->unasked) {
            printf("  problem: %d failover(s) made by a sentinel, %d logged\n", r->unasked,
                   r->seen_unasked);
            ok = 0;
        }
        if (r->ack && sc->deploy == DEPLOY_CLUSTER_FAILOVER && rep.allowed_overlaps > 0)
            ok = 0;
        /* The replicated swap waits for the replicas whether or not the
         * clients ask them to acknowledge: nothing granted is lost. */
        if (sc->deploy == DEPLOY_REPLICATED && rep.allowed_overlaps > 0)
            ok = 0;
        if (rep.failover_gaps > 0) {
            printf("  unavailability per failover (promotion -> first grant that stands): mean "
                   "%.2f s, max %.2f s over %lld\n",
                   rep.failover_gap_ms_sum / 1000.0 / (double)rep.failover_gaps,
                   rep.failover_gap_ms_max / 1000.0, rep.failover_gaps);
            if (report_file)
                fprintf(report_file,
                        "  unavailability per failover (promotion -> first grant that stands): mean "
                        "%.2f s, max %.2f s over %lld\n",
                        rep.failover_gap_ms_sum / 1000.0 / (double)rep.failover_gaps,
                        rep.failover_gap_ms_max / 1000.0, rep.failover_gaps);
        }
        if (lag) {
            char line[256];
            snprintf(line, sizeof(line),
                     "  lagging replica, failover quarantine %s: double grants %lld (%lld "
                     "violations, %lld lost updates, %lld token regressions)\n",
                     sc->quarantine == QUARANTINE_MIXED ? "auto for one worker, off for the "
                                                          "others and for one started after "
                                                          "each switch"
                     : sc->quarantine                   ? "auto"
                                                        : "off",
                     doubles, rep.overlaps, rep.lost_updates,
                     rep.token_regressions);
            fputs(line, stdout);
            if (report_file)
                fputs(line, report_file);
        }
        /* With the quarantine none; without, the hole must show (else the
         * fault had no effect: played again). */
        if (lag && sc->quarantine && doubles > 0)
            ok = 0;
        if (lag && !sc->quarantine && doubles == 0)
            effect = 0;
    }
    /* Clock steps: each one seen (a hold lost with cause "server clock
     * jumped" after it), no lock granted twice; none seen: played again. */
    if (clock) {
        char line[256];
        snprintf(line, sizeof(line),
                 "  clock steps of %d ms: %lld made, %lld detected (%lld holds lost to them); "
                 "double grants: %lld\n",
                 CLOCK_STEP_MS, rep.clock_jumps, rep.clock_jumps_detected, rep.clock_jump_lost,
                 doubles);
        fputs(line, stdout);
        if (report_file)
            fputs(line, report_file);
        if (doubles > 0)
            ok = 0;
        if (rep.clock_jumps_detected == 0)
            effect = 0;
    }
    /* The order must have been checked. Restarts reset it, and CLIENT PAUSE
     * windows (widened by the slack on a busy machine) can cover every wait:
     * there few waits qualify, and none checked is said, not failed. So on a
     * machine busy enough for the margins to be x4 or more (under ASan
     * beside other work: x6, and no two waits of a kill9 run were called
     * that far apart). */
    if (O.type == SAFETY_FAIR && rep.fair_checks == 0) {
        if (strcmp(sc->name, "restart") != 0 && strcmp(sc->name, "pause") != 0 && run_slack < 4)
            ok = 0;
        else
            printf("  fair order: no wait outside the fault windows this run: not checked\n");
    }
    int again = ok && !effect;
    if (!effect)
        ok = 0;
    const char *result = ok ? "PASS" : again ? "FAULT WITHOUT EFFECT (played again)" : "FAIL";
    printf("  result: %s\n\n", result);
    if (report_file)
        fprintf(report_file, "  result: %s\n\n", result);
    munmap(r->shm, sizeof(safety_shm));
    if (!O.keep) {
        char cmd[sizeof(r->dir) + 32];
        snprintf(cmd, sizeof(cmd), "rm -rf '%.255s'", r->dir);
        if ((ok || again) && system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", r->dir);
    }
    if (!ok && !again)
        printf("  (histories kept in %s)\n", r->dir);
    O.names = names_option;
    O.watchdog = watchdog_option;
    return ok ? 0 : again ? 2 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: safety [--scenario baseline|kill9|sigstop|restart|pause|partition|"
                    "sentinel-kill|cluster-failover|cluster-kill|replicated|replicated-lag|"
                    "replicated-lag-quarantine|replicated-lag-mixed|clock-jump|all]"
                    " [--type " SAFETY_TYPE_LIST "] [--seconds S] [--procs P] [--threads T] [--names K] [--ops N]"
                    " [--watchdog MS] [--lock-delay MS] [--writer-first on|off] [--stop-spread] [--worker PATH] [--keep] [--ack] [--sentinel-failover] [--min-total-ops N]"
                    " [--report FILE] [--dlock PATH (type rate)]\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--keep")) {
            O.keep = 1;
            continue;
        }
        if (!strcmp(a, "--ack")) {
            O.ack = 1;
            continue;
        }
        if (!strcmp(a, "--stop-spread")) {
            O.stop_spread = 1;
            continue;
        }
        if (!strcmp(a, "--sentinel-failover")) {
            O.sentinel_failover = 1;
            continue;
        }
        if (!v) {
            usage();
            return 64;
        }
        i++;
        if (!strcmp(a, "--scenario")) O.scenario = v;
        else if (!strcmp(a, "--seconds")) O.seconds = atof(v);
        else if (!strcmp(a, "--procs")) O.procs = atoi(v);
        else if (!strcmp(a, "--threads")) O.threads = atoi(v);
        else if (!strcmp(a, "--names")) O.names = atoi(v);
        else if (!strcmp(a, "--ops")) O.ops = atoll(v);
        else if (!strcmp(a, "--watchdog")) O.watchdog = atoll(v);
        else if (!strcmp(a, "--lock-delay")) O.lock_delay = atoll(v);
        else if (!strcmp(a, "--writer-first") && (!strcmp(v, "on") || !strcmp(v, "off")))
            O.writer_first = !strcmp(v, "on");
        else if (!strcmp(a, "--worker")) O.worker_path = v;
        else if (!strcmp(a, "--dlock")) O.dlock_path = v;
        else if (!strcmp(a, "--min-total-ops")) O.min_total_ops = atoll(v);
        else if (!strcmp(a, "--report")) O.report_path = v;
        else if (!strcmp(a, "--type")) {
            if ((O.type = safety_type_parse(v)) < 0) {
                usage();
                return 64;
            }
        }
        else {
            usage();
            return 64;
        }
    }
    if (O.procs < 2 || O.procs > SAFETY_MAX_WORKERS / 2 || O.threads < 1 ||
        O.threads > SAFETY_MAX_THREADS || O.names < 1 || O.names > SAFETY_MAX_NAMES) {
        usage();
        return 64;
    }
    static char self_dir_worker[PATH_MAX + 32];
    if (!O.worker_path) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
            self[n] = '\0';
            char *slash = strrchr(self, '/');
            if (slash)
                *slash = '\0';
            snprintf(self_dir_worker, sizeof(self_dir_worker), "%s/safety_worker", self);
            O.worker_path = self_dir_worker;
        }
    }
    /* Type rate: the dlock command beside the build's tests (cli/dlock),
     * unless --dlock names it; only the scenarios that keep one server. */
    static char self_dlock[PATH_MAX + 32];
    if (O.type == SAFETY_RATE && !O.dlock_path && O.worker_path) {
        snprintf(self_dlock, sizeof(self_dlock), "%s", O.worker_path);
        char *slash = strrchr(self_dlock, '/');
        size_t at = slash ? (size_t)(slash - self_dlock) : 0;
        snprintf(self_dlock + at, sizeof(self_dlock) - at, "%s../../cli/dlock", slash ? "/" : "");
        if (access(self_dlock, X_OK) == 0)
            O.dlock_path = self_dlock;
    }
    if (O.type == SAFETY_RATE && !O.dlock_path) {
        fprintf(stderr, "safety: --type rate needs --dlock PATH (the dlock command)\n");
        return 64;
    }
    if (O.type == SAFETY_RATE && strcmp(O.scenario, "all") != 0 && !rate_scenario(O.scenario)) {
        fprintf(stderr, "safety: --type rate runs the scenarios baseline, kill9, pause and "
                        "restart (a rate limiter has no holds to stop, cut off or fail over)\n");
        return 64;
    }
    if (O.report_path && !(report_file = fopen(O.report_path, "w"))) {
        perror(O.report_path);
        return 64;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    srand((unsigned)getpid());
    int failed = 0, skipped = 0, ran = 0;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        if (strcmp(O.scenario, "all") != 0 && strcmp(O.scenario, scenarios[i].name) != 0)
            continue;
        if (O.type == SAFETY_RATE && !rate_scenario(scenarios[i].name))
            continue;
        ran++;
        int rc = run_scenario(&scenarios[i]);
        for (int a = 0; rc == 2 && a < 2 && !interrupted; a++)
            rc = run_scenario(&scenarios[i]);
        if (rc == 77)
            skipped++;
        else if (rc != 0)
            failed++;
        if (interrupted)
            break;
    }
    if (!ran) {
        usage();
        return 64;
    }
    /* Top up with baseline operations until the total is reached. */
    while (!interrupted && !failed && O.min_total_ops && total_holds < O.min_total_ops) {
        long long want = O.min_total_ops - total_holds;
        O.ops = want;
        O.seconds = 3600;
        if (run_scenario(&scenarios[0]) != 0)
            failed++;
    }
    printf("TOTAL: %lld guarded operations, %lld violations, %d scenario run%s failed, %d "
           "skipped\n",
           total_holds, total_violations, failed, failed == 1 ? "" : "s", skipped);
    if (report_file) {
        fprintf(report_file, "TOTAL: %lld guarded operations, %lld violations, %d failed, %d "
                             "skipped\n",
                total_holds, total_violations, failed, skipped);
        fclose(report_file);
    }
    if (failed)
        return 1;
    return skipped == ran ? 77 : 0;
}
