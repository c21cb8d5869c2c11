/* Failover scenarios: the lock server is a deployment started with the test
 * harness (tests/harness.c): a primary with 2 replicas and 3 sentinels, or a
 * cluster of 3 primaries with a replica each, every server on a free
 * loopback port and stopped by pid. The fault is a failover:
 *   DEPLOY_SENTINEL_KILL     the primary SIGKILLed; the sentinels promote a
 *                            replica; the old primary comes back as a replica
 *   DEPLOY_CLUSTER_FAILOVER  CLUSTER FAILOVER on the replica of the primary
 *                            that serves the first lock name (a clean switch:
 *                            the replica catches up first)
 *   DEPLOY_CLUSTER_KILL      that primary SIGKILLed; its replica is promoted
 * Each is logged as "O <t_fault> <t_switched>". */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "coord.h"
#include "harness.h"

static th_replset rs;
static th_sentinels ss;
static th_cluster cl;

int deploy_replicas(int kind)
{
    return kind == DEPLOY_SENTINEL_KILL ? TH_REPLICAS : 1;
}

int deploy_start(int kind, char *url, size_t size)
{
    if (kind == DEPLOY_SENTINEL_KILL) {
        if (th_replset_start(&rs, NULL) != 0)
            return -1;
        if (th_sentinels_start(&ss, &rs, "safety") != 0) {
            th_replset_destroy(&rs);
            return -1;
        }
        snprintf(url, size, "%s", ss.url);
        return 0;
    }
    if (th_cluster_start(&cl) != 0)
        return -1;
    snprintf(url, size, "%s", cl.url);
    return 0;
}

void deploy_stop(int kind)
{
    if (kind == DEPLOY_SENTINEL_KILL) {
        th_sentinels_destroy(&ss);
        th_replset_destroy(&rs);
    } else {
        th_cluster_destroy(&cl);
    }
}

redisContext *deploy_admin(int kind, const char *key)
{
    if (kind != DEPLOY_SENTINEL_KILL) {
        th_redis *n = th_cluster_node_for(&cl, key);
        return n ? th_admin(n) : NULL;
    }
    th_redis p = rs.primary;
    p.port = th_sentinel_primary_port(&ss.s[0], ss.master);
    return p.port > 0 ? th_admin(&p) : NULL;
}

static void kill_now(th_redis *n)
{
    kill(n->pid, SIGKILL);
    waitpid(n->pid, NULL, 0);
    n->pid = 0;
}

/* The replica of primary p among the cluster's running nodes, or NULL. */
static th_redis *replica_of(const th_redis *p)
{
    char want[32];
    snprintf(want, sizeof(want), "master_port:%d", p->port);
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        if (&cl.node[i] == p || cl.node[i].pid <= 0)
            continue;
        redisReply *r = th_cmd(&cl.node[i], "INFO replication");
        int is = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
        if (r)
            freeReplyObject(r);
        if (is)
            return &cl.node[i];
    }
    return NULL;
}

static int sentinel_kill(run *r)
{
    int port = th_sentinel_primary_port(&ss.s[0], ss.master);
    th_redis *old = NULL;
    if (rs.primary.port == port)
        old = &rs.primary;
    for (int i = 0; i < TH_REPLICAS; i++)
        if (rs.replica[i].port == port)
            old = &rs.replica[i];
    if (!old || old->pid <= 0)
        return -1;
    int64_t a = safety_now();
    kill_now(old);
    int now_port = port;
    while (now_port == port && safety_now() - a < 30000000000LL && !interrupted) {
        msleep(20);
        now_port = th_sentinel_primary_port(&ss.s[0], ss.master);
        if (now_port < 0)
            now_port = port;
    }
    if (now_port == port)
        return -1;
    coord_log(r, "O %lld %lld", (long long)a, (long long)safety_now());
    /* Back as a replica of the new primary, for the next failover. */
    if (th_redis_restart(old) == 0) {
        redisReply *x = th_cmd(old, "REPLICAOF 127.0.0.1 %d", now_port);
        if (x)
            freeReplyObject(x);
    }
    return 0;
}

static int cluster_switch(run *r, const char *key, int hard)
{
    th_redis *p = th_cluster_node_for(&cl, key);
    th_redis *rep = p ? replica_of(p) : NULL;
    if (!rep)
        return -1;
    int64_t a = safety_now();
    if (hard) {
        kill_now(p);
    } else {
        redisReply *x = th_cmd(rep, "CLUSTER FAILOVER");
        int ok = x && x->type == REDIS_REPLY_STATUS;
        if (x)
            freeReplyObject(x);
        if (!ok)
            return -1;
    }
    while (th_cluster_node_for(&cl, key) != rep && safety_now() - a < 30000000000LL &&
           !interrupted)
        msleep(20);
    if (th_cluster_node_for(&cl, key) != rep)
        return -1;
    coord_log(r, "O %lld %lld", (long long)a, (long long)safety_now());
    return 0;
}

int deploy_failover(run *r, int kind, const char *key)
{
    switch (kind) {
    case DEPLOY_SENTINEL_KILL:
        return sentinel_kill(r);
    case DEPLOY_CLUSTER_FAILOVER:
        return cluster_switch(r, key, 0);
    case DEPLOY_CLUSTER_KILL:
        return cluster_switch(r, key, 1);
    default:
        return -1;
    }
}
