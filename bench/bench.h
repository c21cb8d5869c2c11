/* What the benchmark's scenario files share (dlock_bench.c has them). */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

typedef struct opts {
    const char *scenario, *url, *mode, *kind;
    long cycles, workers, seconds, waiters, hold_ms, concurrency, names, locks, watchdog_ms,
        periods, lease, procs, awaiters, multi_names, inflight, pending, permits;
    const char *tag;   /* appended to the scenario's name ("-tls"), "" by default */
    const char *sentinel;   /* failover: a sentinel's HOST:PORT */
} opts;

extern opts O;

int64_t now_ns(void);   /* CLOCK_MONOTONIC */
void die(const char *what);
/* The first acquisition of l after a switch of primaries at t0 (now_ns):
 * tries without waiting (a lease of 5 s, released at once) every ms for up
 * to 10 s; the ns it took (dies after 10 s), the failed tries in *failed. */
int64_t first_acquire_ns(dlock_lock *l, int64_t t0, long *failed);
dlock_client *open_client(long watchdog_ms, int pool);
redisContext *admin(void);
/* n PINGs on c, one at a time: their round trips (ns) into rt, sorted. */
void ping_round_trips(redisContext *c, int64_t *rt, long n);
long long info_field(redisContext *c, const char *section, const char *field);
int cmp_i64(const void *a, const void *b);   /* qsort of int64_t */
double pct(int64_t *v, size_t n, double p);  /* sorted ns: the p quantile in us */

/* async_bench.c */
void async_many(void);
void async_idle(void);
long long all_commands(redisContext *adm);   /* INFO commandstats' calls, INFO's own left out */

/* latch_bench.c */
void latch(void);
void latch_floor(void);

/* striped_bench.c */
void striped(void);

/* revoke_bench.c */
void revocation(void);

/* failover_bench.c */
void failover(void);

/* replicated_bench.c */
void replicated(void);

/* spin_bench.c */
void spin(void);
/* redlock_bench.c */
void redlock(void);

/* rwpref_bench.c */
void writer_first(void);

/* revoke_request_bench.c */
void revoke_request(void);

#endif
