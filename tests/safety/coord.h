/* The safety coordinator's environment: processes, Redis servers, network
 * namespaces (coord_env.c), shared with the scenarios (coord.c). */
#ifndef DLOCK_SAFETY_COORD_H
#define DLOCK_SAFETY_COORD_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "safety.h"

typedef struct server {
    pid_t pid;
    int port;
    char host[32];          /* where clients reach it */
    const char *ns;         /* network namespace, or NULL */
    char dir[512];
} server;

typedef struct worker {
    pid_t pid;
    int alive;
    const char *ns;
    int64_t hold_ms;
    int64_t quarantine;     /* its failover quarantine: 0 off, -1 auto, else ms */
} worker;

typedef struct run {
    const char *scenario;
    char dir[256];
    char prefix[64];
    safety_shm *shm;
    server lock, store;
    worker w[SAFETY_MAX_WORKERS];
    int nworkers;
    FILE *log;
    int64_t t0;
    char ns_r[32], ns_a[32], ns_b[32];
    int netns;
    int stuck;
    int crashed;   /* workers that died of a signal or exited non-zero */
    char lock_url[512];     /* a deployment's URL (failover scenarios), else empty */
    int ack;                /* replicas each acquisition and renewal waits for */
    int failovers;          /* made so far */
    int unasked;            /* made by a sentinel alone (--sentinel-failover) */
    int seen_unasked;       /* failovers deploy_watch logged */
    int64_t quarantine;     /* the workers' failover quarantine: 0 off, -1 auto, else ms;
                               QUARANTINE_MIXED: worker 0's auto, the others' off */
} run;

/* A scenario's quarantine: the first worker's auto, every other's off, and
 * a worker (off) started after each failover. */
#define QUARANTINE_MIXED (-2)

/* The failover scenarios' deployments (coord_deploy.c). */
enum { DEPLOY_NONE = 0, DEPLOY_SENTINEL_KILL, DEPLOY_CLUSTER_FAILOVER, DEPLOY_CLUSTER_KILL,
       DEPLOY_REPLICATED, DEPLOY_REPLICATED_LAG };
/* Starts it; its URL into url. 0 on success. */
int deploy_start(int kind, char *url, size_t size);
void deploy_stop(int kind);
/* The replicas of each primary (what "every replica acknowledged" means). */
int deploy_replicas(int kind);
/* A connection to the primary serving `key` now, or NULL. */
redisContext *deploy_admin(int kind, const char *key);
/* One failover (of the primary serving `key` on a cluster), logged as an O
 * record; 0 once the switch is seen, -1 when it could not be made. */
int deploy_failover(run *r, int kind, const char *key);
/* Between failovers: logs as an O record a failover the deployment made on
 * its own (Sentinel's), once it is seen complete. */
void deploy_watch(run *r, int kind);
/* DEPLOY_SENTINEL_KILL: a sentinel asked to fail over on its own (SENTINEL
 * FAILOVER), nothing logged; 0 when it accepted. */
int deploy_sentinel_failover(void);
/* Appends a line to the run's coordinator log. */
void coord_log(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern volatile sig_atomic_t interrupted;   /* SIGINT/SIGTERM: wind down */
extern const char *NS_R_ADDR, *NS_A_ADDR, *NS_R_ADDR_B, *NS_B_ADDR;

void msleep(int64_t ms);
/* Runs argv (inside network namespace ns when not NULL), output to out_path. */
pid_t spawn(const char *ns, char *const argv[], const char *out_path);
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Signals pid, waits up to wait_ms for it to end, then SIGKILL. */
void stop_pid(pid_t pid, int sig, int64_t wait_ms);
/* A connection to s (from inside its namespace), or NULL. */
redisContext *admin(const server *s);
int server_launch(run *r, server *s);
int server_start(run *r, server *s, const char *name, const char *ns, const char *host);
int netns_up(run *r);
void netns_down(run *r);
/* Cuts (on = 1) or heals worker namespace A from the lock server. */
int partition(run *r, int on);

#endif
