/* The count-down latch scenario, and the floor under it.
 *
 *   latch       P processes of A/P threads each await one latch; the parent
 *               counts it down once: when did the first and the last await
 *               return, from the count-down call and from its return?
 *   latchfloor  the same wake-up with neither Redis nor dlock: in each
 *               process one thread (as the io thread) sleeps on a futex the
 *               parent wakes, then signals the other threads' condition
 *               variables under one mutex, and each takes the mutex again
 *               on its way out (as leaving the waiter table does). What
 *               waking that many threads costs on this machine, whatever a
 *               library does.
 * Woken threads park until every one is back (a thread's exit would take
 * the CPU from the wake-ups still being measured). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

typedef struct latch_shm {
    atomic_int waiting;         /* threads inside await, all processes */
    atomic_llong first_ns;      /* earliest return */
    atomic_llong last_ns;       /* latest return */
    atomic_int returned;        /* awaiters back (futex word: they park until all are) */
    atomic_int failed;
    atomic_int go;              /* latchfloor: the parent's wake-up (futex word) */
} latch_shm;

static latch_shm *LS;

/* A woken thread notes when, then parks until every one is back. */
static void back_and_park(void)
{
    long long t = now_ns(), m = atomic_load(&LS->last_ns), f = atomic_load(&LS->first_ns);
    while (t > m && !atomic_compare_exchange_weak(&LS->last_ns, &m, t))
        ;
    while ((f == 0 || t < f) && !atomic_compare_exchange_weak(&LS->first_ns, &f, t))
        ;
    long all = O.awaiters / O.procs * O.procs;
    int back = atomic_fetch_add(&LS->returned, 1) + 1;
    if (back == all)   /* the last one lets them all go */
        syscall(SYS_futex, &LS->returned, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    while ((back = atomic_load(&LS->returned)) < all)
        syscall(SYS_futex, &LS->returned, FUTEX_WAIT, back, NULL, NULL, 0);
}

static void shm_map(void)
{
    LS = mmap(NULL, sizeof(*LS), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (LS == MAP_FAILED)
        die("mmap");
}

static void *latch_thread(void *arg)
{
    dlock_latch *l = arg;
    atomic_fetch_add(&LS->waiting, 1);
    if (dlock_latch_await(l, 60000) != DLOCK_OK) {
        fprintf(stderr, "await: %s\n", dlock_last_error());
        atomic_store(&LS->failed, 1);
    }
    back_and_park();
    return NULL;
}

static void latch_child(int threads)
{
    dlock_client *c = open_client(0, threads + 2);
    dlock_latch *l;
    if (dlock_latch_get(c, "bench:latch", &l) != DLOCK_OK)
        die("latch");
    pthread_t th[256];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, latch_thread, l);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    dlock_latch_free(l);
    dlock_client_close(c);
}

void latch(void)
{
    shm_map();
    redisContext *adm = admin();
    dlock_client *c = open_client(0, 0);
    dlock_latch *l;
    /* A count-down of the absent latch changes nothing and loads the script,
     * so the measured one is a single round trip. */
    if (dlock_latch_get(c, "bench:latch", &l) != DLOCK_OK || dlock_latch_count_down(l) != DLOCK_OK ||
        dlock_latch_try_set_count(l, 1, NULL) != DLOCK_OK)
        die("latch");
    long procs = O.procs, per = O.awaiters / procs;
    pid_t pids[64];
    for (long i = 0; i < procs; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            latch_child((int)per);
            _exit(0);
        }
    }
    /* every awaiter inside await, every process subscribed, then settled */
    while (atomic_load(&LS->waiting) < per * procs)
        usleep(1000);
    for (;;) {
        redisReply *r = redisCommand(adm, "PUBSUB NUMSUB redisson_countdownlatch__channel__{bench:latch}");
        long long n = r && r->elements == 2 ? r->element[1]->integer : 0;
        if (r)
            freeReplyObject(r);
        if (n >= procs)
            break;
        usleep(1000);
    }
    usleep(500000);
    long long cmd0 = info_field(adm, "stats", "total_commands_processed:");
    usleep(500000);
    long long idle_cmds = info_field(adm, "stats", "total_commands_processed:") - cmd0 - 1;
    long long cmd1 = info_field(adm, "stats", "total_commands_processed:");
    int64_t t0 = now_ns();
    if (dlock_latch_count_down(l) != DLOCK_OK)
        die("count down");
    int64_t t1 = now_ns();
    for (long i = 0; i < procs; i++)
        waitpid(pids[i], NULL, 0);
    /* the count-down and its INFO aside: what the awakened sent (their
     * UNSUBSCRIBEs, and a GET each for any woken by a zero it could not
     * trust) */
    long long after = info_field(adm, "stats", "total_commands_processed:") - cmd1 - 2;
    long long last = atomic_load(&LS->last_ns), first = atomic_load(&LS->first_ns);
    printf("{\"peer\":\"dlock\",\"scenario\":\"latch\",\"waiters\":%ld,\"processes\":%ld,"
           "\"count_down_us\":%.1f,\"first_awake_after_call_us\":%.1f,"
           "\"last_awake_after_call_us\":%.1f,\"last_awake_after_return_us\":%.1f,"
           "\"spread_us\":%.1f,\"commands_while_waiting\":%lld,\"commands_after\":%lld,"
           "\"failed\":%d}\n",
           per * procs, procs, (t1 - t0) / 1e3, (first - t0) / 1e3, (last - t0) / 1e3,
           (last - t1) / 1e3, (last - first) / 1e3, idle_cmds, after, atomic_load(&LS->failed));
    dlock_latch_free(l);
    dlock_client_close(c);
    redisFree(adm);
    munmap(LS, sizeof(*LS));
}

/* ----------------------------------------------------------- the floor */

typedef struct floor_waiter {
    pthread_cond_t cv;
    int woken;
} floor_waiter;

static pthread_mutex_t floor_mu = PTHREAD_MUTEX_INITIALIZER;

static void *floor_thread(void *arg)
{
    floor_waiter *w = arg;
    pthread_mutex_lock(&floor_mu);
    atomic_fetch_add(&LS->waiting, 1);
    while (!w->woken)
        pthread_cond_wait(&w->cv, &floor_mu);
    pthread_mutex_unlock(&floor_mu);
    pthread_mutex_lock(&floor_mu);   /* leaving */
    pthread_mutex_unlock(&floor_mu);
    back_and_park();
    return NULL;
}

static void floor_child(int threads)
{
    floor_waiter *w = calloc((size_t)threads, sizeof(*w));
    pthread_t *th = calloc((size_t)threads, sizeof(*th));
    for (int i = 0; i < threads; i++) {
        pthread_cond_init(&w[i].cv, NULL);
        pthread_create(&th[i], NULL, floor_thread, &w[i]);
    }
    while (!atomic_load(&LS->go))
        syscall(SYS_futex, &LS->go, FUTEX_WAIT, 0, NULL, NULL, 0);
    pthread_mutex_lock(&floor_mu);
    for (int i = 0; i < threads; i++) {
        w[i].woken = 1;
        pthread_cond_signal(&w[i].cv);
    }
    pthread_mutex_unlock(&floor_mu);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    free(w);
    free(th);
}

void latch_floor(void)
{
    shm_map();
    long procs = O.procs, per = O.awaiters / procs;
    pid_t pids[64];
    for (long i = 0; i < procs; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            floor_child((int)per);
            _exit(0);
        }
    }
    while (atomic_load(&LS->waiting) < per * procs)
        usleep(1000);
    usleep(500000);
    int64_t t0 = now_ns();
    atomic_store(&LS->go, 1);
    syscall(SYS_futex, &LS->go, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    for (long i = 0; i < procs; i++)
        waitpid(pids[i], NULL, 0);
    long long last = atomic_load(&LS->last_ns), first = atomic_load(&LS->first_ns);
    printf("{\"peer\":\"bare-threads\",\"scenario\":\"latchfloor\",\"waiters\":%ld,"
           "\"processes\":%ld,\"first_awake_us\":%.1f,\"last_awake_us\":%.1f,"
           "\"spread_us\":%.1f}\n",
           per * procs, procs, (first - t0) / 1e3, (last - t0) / 1e3, (last - first) / 1e3);
    munmap(LS, sizeof(*LS));
}
