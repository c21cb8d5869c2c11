/* Helper process for the tests.
 *   worker hold URL NAME WATCHDOG_MS        acquire with the watchdog, print
 *                                           "held", then sleep until killed;
 *                                           prints "lost <reason>" if it is lost
 *   worker count URL NAME COUNTER THREADS N each thread N times: acquire, GET
 *                                           counter, SET counter+1, release;
 *                                           prints "done" and exits 0
 *   worker fair URL NAME ID ORDER SLOT_MS   waits for fair lock NAME (slot SLOT_MS),
 *                                           RPUSHes ID to list ORDER while holding
 *                                           it, releases, prints "done", exits 0
 *   worker sem URL NAME THREADS N INSIDE    each thread N times: acquire 1 permit
 *                                           of semaphore NAME, INCR INSIDE (how many
 *                                           hold one now), DECR it, release; prints
 *                                           "done <most INSIDE seen>"
 *   worker permit-hold URL NAME WATCHDOG_MS takes a watchdog permit of permit-
 *                                           expirable semaphore NAME, prints
 *                                           "held <id>", sleeps until killed; prints
 *                                           "lost <reason>" if it is lost
 *   worker lead URL NAME WATCHDOG_MS        campaigns for election NAME (waiting),
 *                                           prints "leader <term>", sleeps until
 *                                           killed; prints "lost <reason>" if lost
 *   worker write-wait URL NAME WATCHDOG_MS  prints "waiting", then waits (no limit)
 *                                           for the write lock of read-write lock
 *                                           NAME, writer-first; prints "held" if it
 *                                           gets it, then sleeps until killed
 *   worker adopt URL NAME WATCHDOG_MS OWNER adopts the lock NAME handed over to
 *                                           OWNER (dlock_lock_adopt, the watchdog),
 *                                           prints "adopted <count>", sleeps until
 *                                           killed; prints "lost <reason>" if lost
 *   worker latch URL NAME THREADS           THREADS threads await latch NAME; prints
 *                                           "ready" once all wait, then "done <us>",
 *                                           the CLOCK_MONOTONIC time (us) at which
 *                                           the last await returned; exits 0
 *   worker barrier URL NAME N WATCHDOG_MS   enters double barrier NAME of N parties
 *                                           (no limit): prints "entering", then
 *                                           "in <round>" once in; sleeps until
 *                                           killed (never leaves) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

static const char *url, *name, *counter;
static int iters;
static long long max_wait_ms;   /* the longest acquire of any thread */
static pthread_mutex_t max_mu = PTHREAD_MUTEX_INITIALIZER;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static dlock_client *client;
static int port;

/* The plain port of the server behind url, for this worker's own hiredis
 * connections: the URL's port, or, when the harness runs over TLS, the plain
 * port it exported beside the TLS one (DLOCK_TEST_PLAIN_<tls port>). */
static int admin_port(const char *u)
{
    /* A sentinel or cluster deployment (DLOCK_TEST_DEPLOY): the harness
     * names a data node, the URL only sentinels or seeds. */
    const char *dep = getenv("DLOCK_TEST_ADMIN_PORT");
    if (dep && strncmp(u, "redis-", 6) == 0)
        return atoi(dep);
    const char *p = strrchr(u, ':');
    int n = p ? atoi(p + 1) : 6379;
    char var[48];
    snprintf(var, sizeof(var), "DLOCK_TEST_PLAIN_%d", n);
    const char *v = getenv(var);
    return v ? atoi(v) : n;
}

static void *count_thread(void *arg)
{
    (void)arg;
    dlock_lock *l;
    if (dlock_lock_get(client, name, &l) != DLOCK_OK)
        return (void *)1;
    redisContext *rc = redisConnect("127.0.0.1", port);
    if (!rc || rc->err)
        return (void *)1;
    for (int i = 0; i < iters; i++) {
        long long t0 = now_ms();
        if (dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK) {
            fprintf(stderr, "acquire: %s\n", dlock_last_error());
            return (void *)1;
        }
        long long waited = now_ms() - t0;
        pthread_mutex_lock(&max_mu);
        if (waited > max_wait_ms)
            max_wait_ms = waited;
        pthread_mutex_unlock(&max_mu);
        /* A deliberately non-atomic read-modify-write: only the lock keeps it exact. */
        redisReply *r = redisCommand(rc, "GET %s", counter);
        long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        if (r)
            freeReplyObject(r);
        r = redisCommand(rc, "SET %s %lld", counter, v + 1);
        if (r)
            freeReplyObject(r);
        if (dlock_lock_release(l) != DLOCK_OK) {
            fprintf(stderr, "release: %s\n", dlock_last_error());
            return (void *)1;
        }
    }
    redisFree(rc);
    dlock_lock_free(l);
    return NULL;
}

static dlock_client *open_client_fair(int64_t watchdog_ms, int64_t slot_ms)
{
    dlock_config *cfg = dlock_config_new();
    dlock_config_set_url(cfg, url);
    if (watchdog_ms)
        dlock_config_set_watchdog_timeout(cfg, watchdog_ms);
    if (slot_ms)
        dlock_config_set_fair_wait_timeout(cfg, slot_ms);
    dlock_client *c = NULL;
    if (dlock_client_open(&c, cfg) != DLOCK_OK) {
        fprintf(stderr, "open: %s\n", dlock_last_error());
        exit(2);
    }
    dlock_config_free(cfg);
    return c;
}

static dlock_client *open_client(int64_t watchdog_ms) { return open_client_fair(watchdog_ms, 0); }

/* CMD KEY [ARG] on *rc, following a cluster's MOVED to the node that
 * serves the key (*rc is then connected there). */
static redisReply *admin_key_cmd(redisContext **rc, const char *cmd, const char *key,
                                 const char *arg)
{
    const char *av[] = {cmd, key, arg};
    int ac = arg ? 3 : 2;
    redisReply *r = redisCommandArgv(*rc, ac, av, NULL);
    for (int hops = 0; hops < 3 && r && r->type == REDIS_REPLY_ERROR &&
                       strncmp(r->str, "MOVED ", 6) == 0; hops++) {
        const char *colon = strrchr(r->str, ':');
        int to = colon ? atoi(colon + 1) : 0;
        freeReplyObject(r);
        redisContext *c = to > 0 ? redisConnect("127.0.0.1", to) : NULL;
        if (!c || c->err) {
            if (c)
                redisFree(c);
            return NULL;
        }
        redisFree(*rc);
        *rc = c;
        r = redisCommandArgv(*rc, ac, av, NULL);
    }
    return r;
}

/* worker fair: one turn on a fair lock, recorded in the ORDER list. */
static int fair_turn(const char *id, const char *order, int64_t slot_ms)
{
    client = open_client_fair(0, slot_ms);
    redisContext *rc = redisConnect("127.0.0.1", admin_port(url));
    dlock_lock *l;
    if (!rc || rc->err || dlock_fair_lock_get(client, name, &l) != DLOCK_OK ||
        dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK) {
        fprintf(stderr, "fair: %s\n", dlock_last_error());
        return 2;
    }
    redisReply *r = admin_key_cmd(&rc, "RPUSH", order, id);
    if (r)
        freeReplyObject(r);
    int bad = dlock_lock_release(l) != DLOCK_OK;
    dlock_lock_free(l);
    dlock_client_close(client);
    redisFree(rc);
    printf("done\n");
    return bad;
}

/* worker sem: the semaphore's holders count themselves in INSIDE. */
static long long most_inside;


static void *sem_thread(void *arg)
{
    (void)arg;
    dlock_semaphore *s;
    if (dlock_semaphore_get(client, name, &s) != DLOCK_OK)
        return (void *)1;
    redisContext *rc = redisConnect("127.0.0.1", port);
    if (!rc || rc->err)
        return (void *)1;
    for (int i = 0; i < iters; i++) {
        if (dlock_semaphore_acquire(s, 1) != DLOCK_OK) {
            fprintf(stderr, "acquire: %s\n", dlock_last_error());
            return (void *)1;
        }
        redisReply *r = admin_key_cmd(&rc, "INCR", counter, NULL);
        long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r)
            freeReplyObject(r);
        pthread_mutex_lock(&max_mu);
        if (v > most_inside)
            most_inside = v;
        pthread_mutex_unlock(&max_mu);
        r = admin_key_cmd(&rc, "DECR", counter, NULL);
        if (r)
            freeReplyObject(r);
        if (dlock_semaphore_release(s, 1) != DLOCK_OK) {
            fprintf(stderr, "release: %s\n", dlock_last_error());
            return (void *)1;
        }
    }
    redisFree(rc);
    dlock_semaphore_free(s);
    return NULL;
}

/* worker latch: awaiters; the last return time, for the parent's lag. */
static long long last_return_us;
static int awaiting_threads;

static void *latch_thread(void *arg)
{
    dlock_latch *l = arg;
    pthread_mutex_lock(&max_mu);
    awaiting_threads++;
    pthread_mutex_unlock(&max_mu);
    int rc = dlock_latch_await(l, DLOCK_WAIT_FOREVER);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    pthread_mutex_lock(&max_mu);
    if (us > last_return_us)
        last_return_us = us;
    pthread_mutex_unlock(&max_mu);
    if (rc != DLOCK_OK)
        fprintf(stderr, "await: %s\n", dlock_last_error());
    return rc == DLOCK_OK ? NULL : (void *)1;
}

static int latch_await(int threads)
{
    client = open_client(0);
    dlock_latch *l;
    if (dlock_latch_get(client, name, &l) != DLOCK_OK)
        return 2;
    pthread_t t[128];
    if (threads > 128)
        threads = 128;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, latch_thread, l);
    /* "ready" once every thread is in await and subscribed: the parent
     * counts this process among the channel's subscribers too. */
    for (;;) {
        pthread_mutex_lock(&max_mu);
        int n = awaiting_threads;
        pthread_mutex_unlock(&max_mu);
        if (n == threads)
            break;
        usleep(1000);
    }
    printf("ready\n");
    fflush(stdout);
    int bad = 0;
    for (int i = 0; i < threads; i++) {
        void *res;
        pthread_join(t[i], &res);
        bad |= res != NULL;
    }
    printf("done %lld\n", last_return_us);
    dlock_latch_free(l);
    dlock_client_close(client);
    return bad;
}

static void print_lost(const char *lname, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)lname;
    (void)owner;
    (void)ud;
    printf("lost %d\n", (int)reason);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "hold") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[4]));
        dlock_lock *l = NULL;
        if (dlock_lock_get(client, name, &l) == DLOCK_OK)
            dlock_lock_set_lost_callback(l, print_lost, NULL);
        if (!l ||
            dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK) {
            fprintf(stderr, "hold: %s\n", dlock_last_error());
            return 2;
        }
        printf("held\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 6 && strcmp(argv[1], "adopt") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[4]));
        dlock_lock *l = NULL;
        int64_t n = 0;
        if (dlock_lock_get_as(client, name, argv[5], &l) == DLOCK_OK)
            dlock_lock_set_lost_callback(l, print_lost, NULL);
        if (!l || dlock_lock_adopt(l, DLOCK_WATCHDOG, &n) != DLOCK_OK) {
            fprintf(stderr, "adopt: %s\n", dlock_last_error());
            return 2;
        }
        printf("adopted %lld\n", (long long)n);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 5 && strcmp(argv[1], "write-wait") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[4]));
        dlock_lock *l = NULL;
        if (dlock_write_lock_get(client, name, &l) != DLOCK_OK ||
            dlock_lock_set_writer_first(l, 1) != DLOCK_OK)
            return 2;
        printf("waiting\n");
        fflush(stdout);
        if (dlock_lock_acquire(l, DLOCK_WATCHDOG) != DLOCK_OK) {
            fprintf(stderr, "write-wait: %s\n", dlock_last_error());
            return 2;
        }
        printf("held\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 6 && strcmp(argv[1], "barrier") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[5]));
        dlock_barrier *b = NULL;
        if (dlock_barrier_get(client, name, atoll(argv[4]), &b) != DLOCK_OK)
            return 2;
        printf("entering\n");
        fflush(stdout);
        if (dlock_barrier_enter(b, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}) !=
            DLOCK_OK) {
            fprintf(stderr, "barrier: %s\n", dlock_last_error());
            return 2;
        }
        printf("in %llu\n", (unsigned long long)dlock_barrier_round(b));
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 5 && strcmp(argv[1], "lead") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[4]));
        dlock_election *e = NULL;
        uint64_t term = 0;
        if (dlock_election_get(client, name, &e) != DLOCK_OK ||
            (dlock_election_set_lost_callback(e, print_lost, NULL),
             dlock_election_campaign(e, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER,
                                                           .token = &term})) != DLOCK_OK) {
            fprintf(stderr, "lead: %s\n", dlock_last_error());
            return 2;
        }
        printf("leader %llu\n", (unsigned long long)term);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 7 && strcmp(argv[1], "count") == 0) {
        url = argv[2];
        name = argv[3];
        counter = argv[4];
        int threads = atoi(argv[5]);
        iters = atoi(argv[6]);
        port = admin_port(url);
        client = open_client(0);
        pthread_t t[64];
        int bad = 0;
        for (int i = 0; i < threads && i < 64; i++)
            pthread_create(&t[i], NULL, count_thread, NULL);
        for (int i = 0; i < threads && i < 64; i++) {
            void *res;
            pthread_join(t[i], &res);
            bad |= res != NULL;
        }
        dlock_client_close(client);
        printf("done %lld\n", max_wait_ms);
        return bad ? 1 : 0;
    }
    if (argc >= 7 && strcmp(argv[1], "fair") == 0) {
        url = argv[2];
        name = argv[3];
        return fair_turn(argv[4], argv[5], atoll(argv[6]));
    }
    if (argc >= 7 && strcmp(argv[1], "sem") == 0) {
        url = argv[2];
        name = argv[3];
        int threads = atoi(argv[4]);
        iters = atoi(argv[5]);
        counter = argv[6];
        port = admin_port(url);
        client = open_client(0);
        pthread_t t[64];
        int bad = 0;
        for (int i = 0; i < threads && i < 64; i++)
            pthread_create(&t[i], NULL, sem_thread, NULL);
        for (int i = 0; i < threads && i < 64; i++) {
            void *res;
            pthread_join(t[i], &res);
            bad |= res != NULL;
        }
        dlock_client_close(client);
        printf("done %lld\n", most_inside);
        return bad ? 1 : 0;
    }
    if (argc >= 5 && strcmp(argv[1], "permit-hold") == 0) {
        url = argv[2];
        name = argv[3];
        client = open_client(atoll(argv[4]));
        dlock_permit_semaphore *p = NULL;
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        if (dlock_permit_semaphore_get(client, name, &p) != DLOCK_OK)
            return 2;
        dlock_permit_semaphore_set_lost_callback(p, print_lost, NULL);
        if (dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)) != DLOCK_OK) {
            fprintf(stderr, "permit-hold: %s\n", dlock_last_error());
            return 2;
        }
        printf("held %s\n", id);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 5 && strcmp(argv[1], "latch") == 0) {
        url = argv[2];
        name = argv[3];
        return latch_await(atoi(argv[4]));
    }
    fprintf(stderr, "usage: worker hold URL NAME WATCHDOG_MS | count URL NAME COUNTER THREADS N"
                    " | fair URL NAME ID ORDER SLOT_MS | sem URL NAME THREADS N INSIDE"
                    " | permit-hold URL NAME WATCHDOG_MS | write-wait URL NAME WATCHDOG_MS"
                    " | latch URL NAME THREADS\n");
    return 64;
}
