/* Safety harness worker: T threads looping over guarded operations.
 * Arguments are key=value:
 *   id lock store prefix names threads history shm watchdog cmdtimeout retry
 *   wait hold_ms seconds type reads slow
 * type=lock (default) reentrant lock handles; type=fair fair lock handles,
 * with `wait` as every waiter's slot (the fair wait timeout): one wait in four
 * is exactly that long, the others have no limit; and one hold in eight lasts
 * `slow` ms longer, so that queues form; type=rw the read-write lock, `reads`
 * percent of the operations under the read lock; type=sem one watchdog
 * permit of a permit-expirable semaphore per hold (`permits` per name);
 * type=latch the rounds of count-down latches the coordinator sets; type=elect
 * terms of leader election, campaign and resign (safety.h); type=rate runs of
 * `dlock run --rate RATE/INTERVALms` (the command at dlock=PATH) whose CMD
 * is this program again, `safety_worker stamp HISTORY W T K`: it appends the
 * start's G record and exits.
 * SIGTERM ends it: threads finish the operation in progress (waits are
 * cancelled), the history is complete, the process exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"
#include "safety.h"

typedef struct params {
    int id;
    const char *lock_url, *store_url, *prefix, *history, *shm;
    int names, threads, retry, type, reads, permits, ack;
    int64_t watchdog, cmdtimeout, wait, hold_ms, seconds, slow;
    int64_t lock_delay;        /* lockdelay=MS: the client's lock-delay (every lock type) */
    int writer_first;          /* writerfirst=1: the client's read-write locks writer-first */
    int64_t quarantine;        /* quarantine=MS: the failover quarantine, 0 off, -1 auto */
    const char *dlock;         /* dlock=PATH: the command (type rate) */
    int rate;                  /* rate=N: starts per interval (type rate) */
    int64_t interval;          /* interval=MS (type rate) */
} params;

static char self_exe[4096];   /* this program, the CMD of type rate's runs */

static params P;
static dlock_client *client;
static dlock_cancel *stop_token;
static atomic_int stopping;
static int hist_fd = -1;
static safety_shm *shm;

typedef struct thread_state {
    int index;
    pthread_t thr;
    atomic_llong lost_at;
    atomic_int lost_reason;
    atomic_llong revoke_at;   /* type revoke: when its handler heard a request (0: not) */
    redisContext *store;
    char store_host[128];
    int store_port;
} thread_state;

static thread_state ts[SAFETY_MAX_THREADS];

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write per line on an O_APPEND file: a kill loses at most this line. */
    ssize_t w = write(hist_fd, line, (size_t)n);
    (void)w;
}

/* Type revoke: a request for a hold of this thread's (io thread). */
static void on_revoke(const char *name, const char *owner, const char *note, void *ud)
{
    (void)name;
    (void)owner;
    (void)note;
    thread_state *t = ud;
    long long zero = 0;
    atomic_compare_exchange_strong(&t->revoke_at, &zero, (long long)safety_now());
}

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    thread_state *t = ud;
    long long zero = 0;
    atomic_compare_exchange_strong(&t->lost_at, &zero, (long long)safety_now());
    /* The cause in the second byte (the checker counts clock jumps). */
    atomic_store(&t->lost_reason, (int)reason | ((int)dlock_last_lost_cause() << 8));
}

static int parse_host_port(const char *url, char *host, size_t hsize, int *port)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *colon = strrchr(p, ':');
    if (!colon)
        return -1;
    snprintf(host, hsize, "%.*s", (int)(colon - p), p);
    *port = atoi(colon + 1);
    return 0;
}

static redisContext *store_conn(thread_state *t)
{
    if (t->store && !t->store->err)
        return t->store;
    if (t->store)
        redisFree(t->store);
    struct timeval tv = {2, 0};
    t->store = redisConnectWithTimeout(t->store_host, t->store_port, tv);
    if (t->store && !t->store->err)
        redisSetTimeout(t->store, tv);
    return t->store;
}

/* Runs the guard script. Returns 1 accepted, 0 refused, -1 storage error;
 * *value for reads. */
static int guard(thread_state *t, int name, const char *op, uint64_t token, long long newval,
                 long long *value)
{
    redisContext *c = store_conn(t);
    if (!c || c->err)
        return -1;
    char keys[5][96], tok[24], val[24];
    const char *suffix[5] = {"mark", "value", "accepted", "refused", "rmark"};
    for (int i = 0; i < 5; i++)
        snprintf(keys[i], sizeof(keys[i]), "%s:guard:%d:%s", P.prefix, name, suffix[i]);
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    snprintf(val, sizeof(val), "%lld", newval);
    redisReply *r;
    if (P.type == SAFETY_RW) {
        const char *argv[] = {"EVAL", SAFETY_GUARD_RW_LUA, "5", keys[0], keys[1], keys[2],
                              keys[3], keys[4], op, tok, val};
        r = redisCommandArgv(c, 11, argv, NULL);
    } else {
        const char *argv[] = {"EVAL", SAFETY_GUARD_LUA, "4", keys[0], keys[1], keys[2], keys[3],
                              op, tok, val};
        r = redisCommandArgv(c, 10, argv, NULL);
    }
    if (!r)
        return -1;
    int res = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER) {
        res = r->element[0]->integer == 1;
        if (r->elements == 2 && value)   /* a read's value; a refused look's too */
            *value = r->element[1]->integer;
    }
    freeReplyObject(r);
    return res;
}

/* The handle on lock name `name` for `owner`: side 'x' the type's exclusive
 * lock, 'r' / 'w' the read-write lock's read / write lock. */
static int handle(const char *name, const char *owner, int side, dlock_lock **out)
{
    switch (P.type) {
    case SAFETY_FAIR:
        return dlock_fair_lock_get_as(client, name, owner, out);
    case SAFETY_NONREENTRANT:
        return dlock_nonreentrant_lock_get_as(client, name, owner, out);
    case SAFETY_SPIN:
        return dlock_spin_lock_get_as(client, name, owner, out);
    case SAFETY_RW:
        return side == 'r' ? dlock_read_lock_get_as(client, name, owner, out)
                           : dlock_write_lock_get_as(client, name, owner, out);
    default:
        return dlock_lock_get_as(client, name, owner, out);
    }
}

/* A release, resign or permit release that fails with an error (not
 * DLOCK_ENOTOWNER: a failover's CLUSTERDOWN, a dropped connection) ends the
 * renewal, but the hold stays in Redis until its lease runs out: a program
 * tries again, and so does a worker (one that went on would take the name
 * again by reentry within the lease, extending it, again and again, while the
 * others starve). Every 50 ms until it answers, for as long as the longest
 * wait. */
typedef struct hold_ref {
    dlock_lock *l;
    dlock_election *e;
    dlock_permit_semaphore *p;
    const char *id;
} hold_ref;

static int release_once(const hold_ref *h)
{
    return h->e ? dlock_election_resign(h->e)
           : h->p ? dlock_permit_semaphore_release(h->p, h->id)
                  : dlock_lock_release(h->l);
}

static int release_answered(const hold_ref *h)
{
    int64_t until = safety_now() + (P.watchdog * 4 + 5000) * 1000000LL;
    for (;;) {
        int rc = release_once(h);
        if (rc == DLOCK_OK || rc == DLOCK_ENOTOWNER || rc == DLOCK_EINVAL || safety_now() > until)
            return rc;
        usleep(50000);
    }
}

/* Type sem: acquire one permit of a name, hold it, release it. The S and E
 * records carry the thread's hold number where a lock's carry a token. */
static void *sem_main(thread_state *t)
{
    safety_slot *slot = &shm->slot[P.id][t->index];
    dlock_permit_semaphore *sems[SAFETY_MAX_NAMES];
    for (int k = 0; k < P.names; k++) {
        char name[128];
        snprintf(name, sizeof(name), "%s:sem:%d", P.prefix, k);
        if (dlock_permit_semaphore_get(client, name, &sems[k]) != DLOCK_OK)
            return NULL;
        dlock_permit_semaphore_set_lost_callback(sems[k], on_lost, t);
    }
    unsigned seed = (unsigned)(P.id * 7919 + t->index * 104729 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    unsigned long long seq = 0;
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        int k = (int)(rand_r(&seed) % (unsigned)P.names);
        dlock_permit_semaphore *p = sems[k];
        /* The limit is set by whoever comes first; again after a restart of
         * the lock server (without persistence it forgets the semaphore). */
        dlock_permit_semaphore_try_set_permits(p, P.permits, NULL);
        int64_t t_call = safety_now();
        slot->name = k;
        slot->since = t_call;
        slot->phase = PH_WAITING;
        record("W %d %d %d %lld %lld x", P.id, t->index, k, (long long)t_call, (long long)P.wait);
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        int rc = dlock_permit_semaphore_acquire_opts(
            p, &(dlock_wait_opts){.wait_ms = P.wait, .cancel = stop_token}, id, sizeof(id));
        int64_t t_acq = safety_now();
        if (rc != DLOCK_OK) {
            record("F %d %d %d %lld %lld %d x", P.id, t->index, k, (long long)t_call,
                   (long long)t_acq, rc);
            slot->phase = PH_IDLE;
            slot->progress = t_acq;
            if (rc != DLOCK_ETIMEDOUT && rc != DLOCK_ECANCELED)
                usleep(20000);
            continue;
        }
        atomic_store(&t->lost_at, 0);
        atomic_store(&t->lost_reason, 0);
        seq++;
        record("S %d %d %d %llu %lld %lld x", P.id, t->index, k, seq, (long long)t_call,
               (long long)t_acq);
        memcpy((char *)slot->permit, id, sizeof(id));
        slot->since = t_acq;
        slot->phase = PH_HOLDING;
        if (P.hold_ms > 0) {
            int64_t us = P.hold_ms * 1000;
            usleep((useconds_t)(us / 2 + rand_r(&seed) % (unsigned)(us / 2 + 1)));
        }
        int64_t t_end = safety_now();
        slot->phase = PH_WRITTEN;
        hold_ref ref = {NULL, NULL, p, id};
        int rrc = release_answered(&ref);
        int64_t t_rel = safety_now();
        if (rrc == DLOCK_ENOTOWNER)
            for (int i = 0; i < 100 && atomic_load(&t->lost_at) == 0; i++)
                usleep(2000);
        /* No guarded operations: both "accepted", nothing written. */
        record("E %d %d %d %llu %lld %lld %lld 1 1 %d %lld %d %lld x 0 0", P.id, t->index, k, seq,
               (long long)t_acq, (long long)t_end, (long long)t_rel, rrc,
               (long long)atomic_load(&t->lost_at), atomic_load(&t->lost_reason),
               (long long)t_end);
        slot->phase = PH_IDLE;
        slot->progress = t_rel;
        slot->ops++;
    }
    for (int k = 0; k < P.names; k++)
        dlock_permit_semaphore_free(sems[k]);
    return NULL;
}

/* Type latch: joins each round the coordinator sets; the first `count`
 * threads to take a ticket count the latch down (after a short random delay),
 * the others await it. */
static void *latch_main(thread_state *t)
{
    safety_slot *slot = &shm->slot[P.id][t->index];
    unsigned seed = (unsigned)(P.id * 7919 + t->index * 104729 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    int64_t last = 0;
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        int64_t r = shm->latch_round;
        if (r == 0 || r == last) {
            slot->progress = safety_now();
            usleep(5000);
            continue;
        }
        last = r;
        int idx = (int)(r % SAFETY_LATCH_ROUNDS);
        int count = shm->latch_count[idx];
        int ticket = __atomic_fetch_add(&shm->latch_tickets[idx], 1, __ATOMIC_SEQ_CST);
        char name[128];
        snprintf(name, sizeof(name), "%s:latch:%lld", P.prefix, (long long)r);
        dlock_latch *l;
        if (dlock_latch_get(client, name, &l) != DLOCK_OK)
            return NULL;
        slot->since = safety_now();
        slot->phase = PH_HOLDING;
        if (ticket < count) {
            usleep((useconds_t)(rand_r(&seed) % 100000));
            int64_t t_sent = safety_now();
            record("d %d %d %lld %lld", P.id, t->index, (long long)r, (long long)t_sent);
            int rc = dlock_latch_count_down(l);
            record("D %d %d %lld %lld %lld %d", P.id, t->index, (long long)r, (long long)t_sent,
                   (long long)safety_now(), rc);
        } else {
            int64_t t_call = safety_now();
            int rc = dlock_latch_await_opts(
                l, &(dlock_wait_opts){.wait_ms = P.wait, .cancel = stop_token});
            record("A %d %d %lld %lld %lld %d", P.id, t->index, (long long)r, (long long)t_call,
                   (long long)safety_now(), rc);
        }
        dlock_latch_free(l);
        slot->phase = PH_IDLE;
        slot->progress = safety_now();
        slot->ops++;
    }
    return NULL;
}

/* Type rate: one `dlock run --rate` at a time, on a random name, its CMD
 * this program's stamp; its outcome as a g record. A SIGTERM to the worker
 * ends the run waiting (recorded as -2: not started, stopped). */
static void *rate_main(thread_state *t)
{
    safety_slot *slot = &shm->slot[P.id][t->index];
    unsigned seed = (unsigned)(P.id * 7919 + t->index * 104729 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    char rate[64], wait[32], name[128], w[16], th[16], k[16];
    snprintf(rate, sizeof(rate), "%d/%lldms", P.rate, (long long)P.interval);
    snprintf(wait, sizeof(wait), "%lldms", (long long)P.wait);
    snprintf(w, sizeof(w), "%d", P.id);
    snprintf(th, sizeof(th), "%d", t->index);
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        int kn = (int)(rand_r(&seed) % (unsigned)P.names);
        snprintf(name, sizeof(name), "%s:rate:%d", P.prefix, kn);
        snprintf(k, sizeof(k), "%d", kn);
        char *argv[] = {(char *)P.dlock, "--url", (char *)P.lock_url, "run", "--rate", rate, "-w",
                        wait, name, "--", self_exe, "stamp", (char *)P.history, w, th, k, NULL};
        int64_t t_call = safety_now();
        slot->name = kn;
        slot->since = t_call;
        slot->phase = PH_HOLDING;   /* a kill9 victim: its run dies with it */
        pid_t pid = fork();
        if (pid == 0) {
            sigset_t none;
            sigemptyset(&none);
            pthread_sigmask(SIG_SETMASK, &none, NULL);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execv(argv[0], argv);
            _exit(127);
        }
        int status = -1, st = 0, sent = 0;
        while (pid > 0) {
            pid_t r = waitpid(pid, &st, WNOHANG);
            if (r == pid) {
                status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                break;
            }
            if (r < 0 && errno != EINTR)
                break;
            if (atomic_load(&stopping) && !sent) {
                kill(pid, SIGTERM);
                sent = 1;
            }
            usleep(2000);
        }
        if (sent && status != 0)
            status = -2;   /* ended by the stop */
        record("g %d %d %d %lld %lld %d", P.id, t->index, kn, (long long)t_call,
               (long long)safety_now(), status);
        slot->phase = PH_IDLE;
        slot->progress = safety_now();
        slot->ops++;
    }
    return NULL;
}

/* Type barrier: the thread is one party of one barrier for P.permits
 * parties (procs x threads); enter, in for up to hold_ms, leave; B and V
 * records. */
static void *barrier_main(thread_state *t)
{
    safety_slot *slot = &shm->slot[P.id][t->index];
    char name[128];
    snprintf(name, sizeof(name), "%s:barrier:0", P.prefix);
    dlock_barrier *b;
    if (dlock_barrier_get(client, name, P.permits, &b) != DLOCK_OK)
        return NULL;
    unsigned seed = (unsigned)(P.id * 7919 + t->index * 104729 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        int64_t t_call = safety_now();
        slot->name = 0;
        slot->since = t_call;
        slot->phase = PH_WAITING;
        int rc = dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = P.wait, .cancel = stop_token});
        int64_t t_ret = safety_now();
        unsigned long long round = rc == DLOCK_OK ? dlock_barrier_round(b) : 0;
        record("B %d %d %llu %lld %lld %d", P.id, t->index, round, (long long)t_call,
               (long long)t_ret, rc);
        slot->progress = t_ret;
        if (rc != DLOCK_OK) {
            slot->phase = PH_IDLE;
            if (rc != DLOCK_ETIMEDOUT && rc != DLOCK_ECANCELED)
                usleep(20000);   /* an error: do not spin */
            continue;
        }
        slot->since = t_ret;
        slot->phase = PH_HOLDING;
        if (P.hold_ms > 0)
            usleep((useconds_t)(rand_r(&seed) % (unsigned)(P.hold_ms * 1000 + 1)));
        t_call = safety_now();
        slot->phase = PH_WRITTEN;
        /* Its leave sent (a kill before the V record leaves this one). */
        record("v %d %d %llu %lld", P.id, t->index, round, (long long)t_call);
        do {   /* an error before the member went leaves it in: leave again */
            rc = dlock_barrier_leave(b, &(dlock_wait_opts){.wait_ms = P.wait, .cancel = stop_token});
            if (dlock_barrier_phase(b) == DLOCK_BARRIER_IN)
                usleep(50000);
        } while (dlock_barrier_phase(b) == DLOCK_BARRIER_IN && !atomic_load(&stopping));
        t_ret = safety_now();
        record("V %d %d %llu %lld %lld %d", P.id, t->index, round, (long long)t_call,
               (long long)t_ret, rc);
        slot->phase = PH_IDLE;
        slot->progress = t_ret;
        slot->ops++;
    }
    dlock_barrier_free(b);
    return NULL;
}

/* The CMD of a type rate run: `stamp HISTORY W T K` appends its start. */
static int stamp(char **argv)
{
    int64_t now = safety_now();
    int fd = open(argv[2], O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return 2;
    char line[128];
    int n = snprintf(line, sizeof(line), "G %d %d %d %lld\n", atoi(argv[3]), atoi(argv[4]),
                     atoi(argv[5]), (long long)now);
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    return ok ? 0 : 2;
}

/* Type revoke: holds for REVOKE_HOLD_MS, or until its handler heard a
 * request (a Y record). */
static void hold_until_asked(thread_state *t, int k, uint64_t token)
{
    int64_t end = safety_now() + REVOKE_HOLD_MS * 1000000LL;
    while (safety_now() < end && !atomic_load(&stopping)) {
        long long at = atomic_load(&t->revoke_at);
        if (at) {
            record("Y %d %d %d %llu %lld", P.id, t->index, k, (unsigned long long)token, at);
            return;
        }
        usleep(2000);
    }
}

/* Type revoke: asks the holders of a random name to let go every
 * REVOKE_ASK_MS or so (Q records). */
static void *asker_main(void *arg)
{
    (void)arg;
    dlock_lock *l[SAFETY_MAX_NAMES] = {0};
    for (int k = 0; k < P.names; k++) {
        char name[128];
        snprintf(name, sizeof(name), "%s:lock:%d", P.prefix, k);
        if (dlock_lock_get(client, name, &l[k]) != DLOCK_OK)
            goto out;
    }
    unsigned seed = (unsigned)(P.id * 6271 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        usleep((useconds_t)(REVOKE_ASK_MS * 500 + rand_r(&seed) % (REVOKE_ASK_MS * 1000)));
        int k = (int)(rand_r(&seed) % (unsigned)P.names);
        dlock_revoke_answer ans = {0, 0};
        int64_t sent = safety_now();
        int rc = dlock_lock_request_revoke(l[k], "safety", &ans);
        record("Q %d %d %lld %lld %d %d %d", P.id, k, (long long)sent, (long long)safety_now(), rc,
               ans.holders, ans.listeners);
    }
out:
    for (int k = 0; k < P.names; k++)
        if (l[k])
            dlock_lock_free(l[k]);
    return NULL;
}

/* The E record of a hold (after the loss report of a release that found it
 * gone, which comes from the io thread right after: given a moment). */
static void end_hold(thread_state *t, int k, uint64_t token, int64_t t_acq, int64_t t_end,
                     int64_t t_rel, int op1, int op2, int rrc, int64_t t_write, int side,
                     long long v1, long long v2)
{
    if (rrc == DLOCK_ENOTOWNER)
        for (int i = 0; i < 100 && atomic_load(&t->lost_at) == 0; i++)
            usleep(2000);
    record("E %d %d %d %llu %lld %lld %lld %d %d %d %lld %d %lld %c %lld %lld", P.id, t->index,
           k, (unsigned long long)token, (long long)t_acq, (long long)t_end, (long long)t_rel,
           op1, op2, rrc, (long long)atomic_load(&t->lost_at), atomic_load(&t->lost_reason),
           (long long)t_write, side, v1, v2);
}

/* Type handover: the second owner adopts the hold handed to it after a gap
 * (retried on errors, as a release is), does the guarded read-modify-write
 * with the giver's token, and releases. S/F records with side a. */
static void adopt_and_hold(thread_state *t, dlock_lock *b, int k, uint64_t token,
                           unsigned *seed)
{
    usleep((useconds_t)(rand_r(seed) % (HANDOVER_GAP_MS * 1000)));
    int64_t t_call = safety_now();
    int64_t until = t_call + (P.watchdog * 4 + 5000) * 1000000LL;
    int rc;
    do {
        rc = dlock_lock_adopt(b, DLOCK_WATCHDOG, NULL);
        if (rc != DLOCK_OK && rc != DLOCK_ENOTOWNER && rc != DLOCK_EINVAL)
            usleep(50000);
    } while (rc != DLOCK_OK && rc != DLOCK_ENOTOWNER && rc != DLOCK_EINVAL &&
             safety_now() < until && !atomic_load(&stopping));
    int64_t t_acq = safety_now();
    if (rc != DLOCK_OK) {
        record("F %d %d %d %lld %lld %d a", P.id, t->index, k, (long long)t_call,
               (long long)t_acq, rc);
        return;
    }
    atomic_store(&t->lost_at, 0);
    atomic_store(&t->lost_reason, 0);
    record("S %d %d %d %llu %lld %lld a", P.id, t->index, k, (unsigned long long)token,
           (long long)t_call, (long long)t_acq);
    long long v1 = 0, v2 = 0;
    int op1 = guard(t, k, "read", token, 0, &v1), op2 = 0;
    int64_t t_write = safety_now();
    if (op1 == 1) {
        v2 = v1 + 1;
        op2 = guard(t, k, "write", token, v2, NULL);
    }
    int64_t t_end = safety_now();
    hold_ref ref = {b, NULL, NULL, NULL};
    int rrc = release_answered(&ref);
    end_hold(t, k, token, t_acq, t_end, safety_now(), op1, op2, rrc, t_write, 'x', v1, v2);
}

static void *thread_main(void *arg)
{
    thread_state *t = arg;
    if (P.type == SAFETY_RATE)
        return rate_main(t);
    if (P.type == SAFETY_SEM)
        return sem_main(t);
    if (P.type == SAFETY_LATCH)
        return latch_main(t);
    if (P.type == SAFETY_BARRIER)
        return barrier_main(t);
    safety_slot *slot = &shm->slot[P.id][t->index];
    parse_host_port(P.store_url, t->store_host, sizeof(t->store_host), &t->store_port);
    /* One explicit owner per thread: the lost callback's ud names the thread.
     * The read and write handles of a name share it (one owner, two sides). */
    char owner[DLOCK_OWNER_BUFSIZE], owner_b[DLOCK_OWNER_BUFSIZE];
    dlock_client_new_owner_id(client, owner, sizeof(owner));
    dlock_client_new_owner_id(client, owner_b, sizeof(owner_b));
    /* Type handover: the handles of the second owner, which adopts. */
    dlock_lock *locks[SAFETY_MAX_NAMES], *rlocks[SAFETY_MAX_NAMES], *blocks[SAFETY_MAX_NAMES] = {0};
    dlock_election *elects[SAFETY_MAX_NAMES] = {0};
    for (int k = 0; k < P.names; k++) {
        char name[128];
        snprintf(name, sizeof(name), "%s:lock:%d", P.prefix, k);
        locks[k] = rlocks[k] = NULL;
        if (P.type == SAFETY_ELECT) {
            if (dlock_election_get_as(client, name, owner, &elects[k]) != DLOCK_OK)
                return NULL;
            dlock_election_set_lost_callback(elects[k], on_lost, t);
            continue;
        }
        if (handle(name, owner, P.type == SAFETY_RW ? 'w' : 'x', &locks[k]) != DLOCK_OK)
            return NULL;
        dlock_lock_set_lost_callback(locks[k], on_lost, t);
        if (P.type == SAFETY_REVOKE &&
            dlock_lock_set_revoke_handler(locks[k], on_revoke, t) != DLOCK_OK)
            return NULL;
        if (P.type == SAFETY_HANDOVER) {
            if (dlock_lock_get_as(client, name, owner_b, &blocks[k]) != DLOCK_OK)
                return NULL;
            dlock_lock_set_lost_callback(blocks[k], on_lost, t);
        }
        if (P.type == SAFETY_RW) {
            if (handle(name, owner, 'r', &rlocks[k]) != DLOCK_OK)
                return NULL;
            dlock_lock_set_lost_callback(rlocks[k], on_lost, t);
        }
    }
    unsigned seed = (unsigned)(P.id * 7919 + t->index * 104729 + (unsigned)safety_now());
    int64_t deadline = safety_now() + P.seconds * 1000000000LL;
    while (!atomic_load(&stopping) && safety_now() < deadline) {
        int k = (int)(rand_r(&seed) % (unsigned)P.names);
        int side = 'x';
        if (P.type == SAFETY_RW)
            side = (int)(rand_r(&seed) % 100) < P.reads ? 'r' : 'w';
        dlock_lock *l = side == 'r' ? rlocks[k] : locks[k];
        /* A fair waiter's slot is the fair wait timeout (= P.wait) when it
         * waits without limit, and its wait otherwise: the same for all. */
        int64_t wait = P.wait;
        if (P.type == SAFETY_FAIR && rand_r(&seed) % 4 != 0)
            wait = DLOCK_WAIT_FOREVER;
        int64_t t_call = safety_now();
        slot->name = k;
        slot->since = t_call;
        slot->phase = PH_WAITING;
        record("W %d %d %d %lld %lld %c", P.id, t->index, k, (long long)t_call, (long long)wait,
               side);
        atomic_store(&t->revoke_at, 0);
        uint64_t token = 0;   /* type elect: the term */
        int rc = elects[k]
                     ? dlock_election_campaign(elects[k], &(dlock_wait_opts){.wait_ms = wait,
                                                                             .cancel = stop_token,
                                                                             .token = &token})
                     : dlock_lock_acquire_opts(l, &(dlock_wait_opts){.wait_ms = wait,
                                                                     .cancel = stop_token,
                                                                     .token = &token});
        int64_t t_acq = safety_now();
        if (rc != DLOCK_OK) {
            record("F %d %d %d %lld %lld %d %c", P.id, t->index, k, (long long)t_call,
                   (long long)t_acq, rc, side);
            slot->phase = PH_IDLE;
            slot->progress = t_acq;
            if (rc != DLOCK_ETIMEDOUT && rc != DLOCK_ECANCELED)
                usleep(20000);   /* an error: do not spin */
            continue;
        }
        atomic_store(&t->lost_at, 0);
        atomic_store(&t->lost_reason, 0);
        record("S %d %d %d %llu %lld %lld %c", P.id, t->index, k, (unsigned long long)token,
               (long long)t_call, (long long)t_acq, side);
        slot->since = t_acq;
        slot->phase = PH_HOLDING;
        /* Exclusive and write holds: read, then write value + 1. Read holds:
         * read twice (peek, then look: the value even when refused). */
        long long v1 = 0, v2 = 0;
        int op1 = guard(t, k, side == 'r' ? "peek" : "read", token, 0, &v1);
        if (P.type == SAFETY_REVOKE)
            hold_until_asked(t, k, token);
        else if (P.hold_ms > 0) {
            int64_t us = P.hold_ms * 1000;
            usleep((useconds_t)(us / 2 + rand_r(&seed) % (unsigned)(us / 2 + 1)));
        }
        if (P.slow > 0 && rand_r(&seed) % 8 == 0)
            usleep((useconds_t)(P.slow * 1000));
        int64_t t_write = safety_now();   /* before the write is sent: a late write is one
                                             sent after the fault, not one answered after it */
        int op2 = 0;
        if (op1 == 1 && side == 'r') {
            op2 = guard(t, k, "look", token, 0, &v2);
        } else if (op1 == 1) {
            v2 = v1 + 1;
            op2 = guard(t, k, "write", token, v2, NULL);
        }
        slot->phase = PH_WRITTEN;
        int64_t t_end = safety_now();
        hold_ref ref = {l, elects[k], NULL, NULL};
        /* Type handover: one hold in two goes to the second owner instead
         * (a transfer that fails is released as usual: one that ran
         * unanswered is then "not held", a lost hold). */
        int handed = 0, rrc = DLOCK_ENOTOWNER;
        if (blocks[k] && op1 == 1 && rand_r(&seed) % 2 == 0) {
            rrc = dlock_lock_transfer(l, owner_b);
            handed = rrc == DLOCK_OK;
        }
        if (!handed)
            rrc = release_answered(&ref);
        int64_t t_rel = safety_now();
        end_hold(t, k, token, t_acq, t_end, t_rel, op1, op2, rrc, t_write, handed ? 'h' : side,
                 v1, v2);
        if (handed)
            adopt_and_hold(t, blocks[k], k, token, &seed);
        slot->phase = PH_IDLE;
        slot->progress = safety_now();
        slot->ops++;
    }
    for (int k = 0; k < P.names; k++) {
        if (locks[k])
            dlock_lock_free(locks[k]);
        if (rlocks[k])
            dlock_lock_free(rlocks[k]);
        if (elects[k])
            dlock_election_free(elects[k]);
        if (blocks[k])
            dlock_lock_free(blocks[k]);
    }
    if (t->store)
        redisFree(t->store);
    return NULL;
}

/* SIGTERM, read synchronously: stop after the current operations. */
static void *signal_main(void *arg)
{
    sigset_t *set = arg;
    int sig;
    sigwait(set, &sig);
    atomic_store(&stopping, 1);
    dlock_cancel_fire(stop_token);
    return NULL;
}

static int parse(int argc, char **argv)
{
    P.names = 3;
    P.threads = 4;
    P.watchdog = 1500;
    P.cmdtimeout = 1000;
    P.retry = 2;
    P.wait = 10000;
    P.seconds = 3600;
    P.reads = 60;
    P.permits = SAFETY_SEM_PERMITS;
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return -1;
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "id")) P.id = atoi(v);
        else if (!strcmp(k, "lock")) P.lock_url = v;
        else if (!strcmp(k, "store")) P.store_url = v;
        else if (!strcmp(k, "prefix")) P.prefix = v;
        else if (!strcmp(k, "names")) P.names = atoi(v);
        else if (!strcmp(k, "threads")) P.threads = atoi(v);
        else if (!strcmp(k, "history")) P.history = v;
        else if (!strcmp(k, "shm")) P.shm = v;
        else if (!strcmp(k, "watchdog")) P.watchdog = atoll(v);
        else if (!strcmp(k, "cmdtimeout")) P.cmdtimeout = atoll(v);
        else if (!strcmp(k, "retry")) P.retry = atoi(v);
        else if (!strcmp(k, "wait")) P.wait = atoll(v);
        else if (!strcmp(k, "hold_ms")) P.hold_ms = atoll(v);
        else if (!strcmp(k, "seconds")) P.seconds = atoll(v);
        else if (!strcmp(k, "reads")) P.reads = atoi(v);
        else if (!strcmp(k, "slow")) P.slow = atoll(v);
        else if (!strcmp(k, "permits")) P.permits = atoi(v);
        else if (!strcmp(k, "ack")) P.ack = atoi(v);
        else if (!strcmp(k, "lockdelay")) P.lock_delay = atoll(v);
        else if (!strcmp(k, "quarantine")) P.quarantine = atoll(v);
        else if (!strcmp(k, "writerfirst")) P.writer_first = atoi(v);
        else if (!strcmp(k, "dlock")) P.dlock = v;
        else if (!strcmp(k, "rate")) P.rate = atoi(v);
        else if (!strcmp(k, "interval")) P.interval = atoll(v);
        else if (!strcmp(k, "type")) {
            if ((P.type = safety_type_parse(v)) < 0)
                return -1;
        }
        else return -1;
    }
    if (!P.lock_url || !P.store_url || !P.prefix || !P.history || !P.shm || P.id < 0 ||
        P.id >= SAFETY_MAX_WORKERS || P.threads < 1 || P.threads > SAFETY_MAX_THREADS ||
        P.names < 1 || P.names > SAFETY_MAX_NAMES || P.reads < 0 || P.reads > 100 ||
        P.permits < 1 ||
        (P.type == SAFETY_FAIR && P.wait < 2) ||
        (P.type == SAFETY_RATE && (!P.dlock || P.rate < 1 || P.interval < 1)))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "stamp"))
        return stamp(argv);
    ssize_t sn = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    self_exe[sn > 0 ? sn : 0] = '\0';
    if (parse(argc, argv) != 0) {
        fprintf(stderr, "usage: safety_worker id=N lock=URL store=URL prefix=P history=FILE "
                        "shm=FILE [names=3 threads=4 watchdog=1500 cmdtimeout=1000 retry=2 "
                        "wait=10000 hold_ms=0 seconds=3600 type=" SAFETY_TYPE_LIST " reads=60 slow=0 "
                        "permits=2 ack=0 lockdelay=0 quarantine=0|MS|-1 writerfirst=0 "
                        "dlock=PATH rate=N interval=MS]\n"
                        "       safety_worker stamp HISTORY W T K\n");
        return 64;
    }
    hist_fd = open(P.history, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int sfd = open(P.shm, O_RDWR | O_CLOEXEC);
    if (hist_fd < 0 || sfd < 0) {
        perror("open");
        return 2;
    }
    shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);   /* before any thread, the io thread too */

    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, P.lock_url);
    dlock_config_set_watchdog_timeout(cfg, P.watchdog);
    if (P.lock_delay > 0 && dlock_config_set_lock_delay(cfg, P.lock_delay) != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", P.id, dlock_last_error());
        return 2;
    }
    if (P.writer_first && dlock_config_set_writer_first(cfg, 1) != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", P.id, dlock_last_error());
        return 2;
    }
    if (P.quarantine != 0 &&
        dlock_config_set_failover_quarantine(
            cfg, P.quarantine < 0 ? DLOCK_QUARANTINE_AUTO : DLOCK_QUARANTINE_ON,
            P.quarantine < 0 ? 0 : P.quarantine) != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", P.id, dlock_last_error());
        return 2;
    }
    dlock_config_set_command_timeout(cfg, P.cmdtimeout);
    dlock_config_set_connect_timeout(cfg, P.cmdtimeout);
    /* Every acquisition and renewal waits for `ack` replicas; fewer: given
     * back, or the hold reported lost. */
    if (P.ack > 0 &&
        dlock_config_set_replica_ack(cfg, P.ack, P.cmdtimeout * 4 / 5, DLOCK_ACK_RELEASE) != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", P.id, dlock_last_error());
        return 2;
    }
    dlock_config_set_retry(cfg, P.retry, 200);
    if (P.type == SAFETY_FAIR)
        dlock_config_set_fair_wait_timeout(cfg, P.wait);
    int rc = DLOCK_ECONN;
    for (int tries = 0; tries < 50 && rc != DLOCK_OK; tries++) {
        rc = dlock_client_open(&client, cfg);
        if (rc != DLOCK_OK)
            usleep(100000);   /* the server may be restarting or paused */
    }
    dlock_config_free(cfg);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", P.id, dlock_last_error());
        return 2;
    }
    dlock_cancel_new(&stop_token);
    pthread_t sig_thr;
    pthread_create(&sig_thr, NULL, signal_main, &set);
    pthread_detach(sig_thr);
    for (int i = 0; i < P.threads; i++) {
        shm->slot[P.id][i].pid = (int32_t)getpid();
        shm->slot[P.id][i].progress = safety_now();
        ts[i].index = i;
        pthread_create(&ts[i].thr, NULL, thread_main, &ts[i]);
    }
    pthread_t asker;
    int asking = P.type == SAFETY_REVOKE && pthread_create(&asker, NULL, asker_main, NULL) == 0;
    for (int i = 0; i < P.threads; i++)
        pthread_join(ts[i].thr, NULL);
    if (asking)
        pthread_join(asker, NULL);
    dlock_client_close(client);
    close(hist_fd);
    return 0;
}
