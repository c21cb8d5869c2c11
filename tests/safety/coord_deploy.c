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
 *   DEPLOY_REPLICATED        a primary with 2 replicas under
 *                            redis-replicated:// (no Sentinel): the roles
 *                            swapped as a managed service or an operator
 *                            does it (writes paused on the primary, the
 *                            replicas caught up, REPLICAOF NO ONE on the
 *                            next one, REPLICAOF to it on the others, writes
 *                            let go: the old primary answers READONLY)
 *   DEPLOY_REPLICATED_LAG    the same set, but the next primary is cut off
 *                            from replication for a while first and promoted
 *                            without catching up: the grants it missed are
 *                            lost (replicated_lag)
 * Each is logged as "O <t_fault> <t_switched>", and so is a failover the
 * sentinels make on their own (deploy_watch). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "coord.h"
#include "harness.h"

static th_replset rs;
static th_sentinels ss;
static th_cluster cl;
static th_redis *rep_cur;   /* DEPLOY_REPLICATED: the primary now */
/* DEPLOY_SENTINEL_KILL: the primary as the last O record left it, and the
 * servers that were primaries before and may still say so (a primary the
 * sentinels replaced stays one until they reach it): deploy_watch. */
static int known_port;
static int former[TH_REPLICAS + 1];
static int64_t unplanned_at;   /* deploy_watch: when it first saw a switch begin, 0: none */

static th_redis *rs_server(int i) { return i == 0 ? &rs.primary : &rs.replica[i - 1]; }

static int replicated(int kind)
{
    return kind == DEPLOY_REPLICATED || kind == DEPLOY_REPLICATED_LAG;
}

int deploy_replicas(int kind)
{
    return kind == DEPLOY_SENTINEL_KILL || replicated(kind) ? TH_REPLICAS : 1;
}

int deploy_start(int kind, char *url, size_t size)
{
    if (replicated(kind)) {
        if (th_replset_start(&rs, NULL) != 0)
            return -1;
        rep_cur = &rs.primary;
        size_t off = (size_t)snprintf(url, size, "redis-replicated://");
        for (int i = 0; i <= TH_REPLICAS && off < size; i++)
            off += (size_t)snprintf(url + off, size - off, "%s127.0.0.1:%d", i ? "," : "",
                                    rs_server(i)->port);
        return off < size ? 0 : -1;
    }
    if (kind == DEPLOY_SENTINEL_KILL) {
        known_port = 0;   /* deploy_watch's: this deployment's */
        memset(former, 0, sizeof(former));
        unplanned_at = 0;
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
    if (replicated(kind)) {
        th_replset_destroy(&rs);
        rep_cur = NULL;
    } else if (kind == DEPLOY_SENTINEL_KILL) {
        th_sentinels_destroy(&ss);
        th_replset_destroy(&rs);
    } else {
        th_cluster_destroy(&cl);
    }
}

redisContext *deploy_admin(int kind, const char *key)
{
    if (replicated(kind))
        return rep_cur ? th_admin(rep_cur) : NULL;
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

/* The port every sentinel names the primary, or -1 while they disagree. */
static int sentinels_agree(void)
{
    int port = -1;
    for (int i = 0; i < TH_SENTINELS; i++) {
        int p = th_sentinel_primary_port(&ss.s[i], ss.master);
        if (p <= 0 || (i > 0 && p != port))
            return -1;
        port = p;
    }
    return port;
}

static int is_primary(const th_redis *n)
{
    redisReply *x = n->pid > 0 ? th_cmd(n, "ROLE") : NULL;
    int yes = x && x->type == REDIS_REPLY_ARRAY && x->elements > 0 &&
              x->element[0]->type == REDIS_REPLY_STRING && !strcmp(x->element[0]->str, "master");
    if (x)
        freeReplyObject(x);
    return yes;
}

/* The primary is now `port` (an O record was just written). */
static void primary_is(int port)
{
    if (known_port > 0 && known_port != port)
        for (int i = 0; i <= TH_REPLICAS; i++)
            if (rs_server(i)->port == known_port)
                former[i] = 1;
    known_port = port;
    unplanned_at = 0;
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
    /* Switched once every sentinel names the new primary: a client may ask
     * any of them (one that lags names the dead primary meanwhile). */
    while (sentinels_agree() != now_port && safety_now() - a < 30000000000LL && !interrupted)
        msleep(20);
    if (unplanned_at && unplanned_at < a)
        a = unplanned_at;   /* the sentinels had begun one on their own */
    coord_log(r, "O %lld %lld", (long long)a, (long long)safety_now());
    primary_is(now_port);
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
        /* A manual failover the replica gives up on (its primary slow to
         * answer on a busy machine: the manual failover's 5 s timeout) is
         * asked again, up to 3 times, 10 s apart (one CI rehearsal in
         * several: "the failover could not be made"). */
        for (int attempt = 0; attempt < 3 && th_cluster_node_for(&cl, key) != rep &&
                              !interrupted;
             attempt++) {
            redisReply *x = th_cmd(rep, "CLUSTER FAILOVER");
            int ok = x && x->type == REDIS_REPLY_STATUS;
            if (x)
                freeReplyObject(x);
            if (!ok)
                return -1;
            int64_t t = safety_now();
            while (th_cluster_node_for(&cl, key) != rep && safety_now() - t < 10000000000LL &&
                   !interrupted)
                msleep(20);
        }
    }
    while (th_cluster_node_for(&cl, key) != rep && safety_now() - a < 30000000000LL &&
           !interrupted)
        msleep(20);
    if (th_cluster_node_for(&cl, key) != rep)
        return -1;
    coord_log(r, "O %lld %lld", (long long)a, (long long)safety_now());
    return 0;
}

/* Replies with a status (OK), or -1. */
static int cmd_ok(redisContext *c, const char *cmd)
{
    redisReply *x = c ? redisCommand(c, cmd) : NULL;
    int ok = x && (x->type == REDIS_REPLY_STATUS || x->type == REDIS_REPLY_INTEGER);
    if (x)
        freeReplyObject(x);
    return ok ? 0 : -1;
}

/* 1 when every replica of the primary behind c has acknowledged all of its
 * replication stream (INFO replication: each slaveN's offset at
 * master_repl_offset), 0 when not yet, -1 on no answer. */
static int replicas_caught_up(redisContext *c)
{
    redisReply *x = redisCommand(c, "INFO replication");
    if (!x || x->type != REDIS_REPLY_STRING) {
        if (x)
            freeReplyObject(x);
        return -1;
    }
    const char *m = strstr(x->str, "master_repl_offset:");
    long long want = m ? atoll(m + strlen("master_repl_offset:")) : -1;
    int n = 0, ok = want >= 0;
    for (const char *p = x->str; ok && (p = strstr(p, ",offset=")) != NULL; p++) {
        n++;
        if (atoll(p + strlen(",offset=")) < want)
            ok = 0;
    }
    freeReplyObject(x);
    return ok && n >= TH_REPLICAS;
}

/* Once np (promoted) has its replicas back, the O record from a, the
 * fault's start. */
static int switched(run *r, th_redis *np, int64_t a)
{
    rep_cur = np;
    if (th_replset_await(np) != 0)
        return -1;
    coord_log(r, "O %lld %lld", (long long)a, (long long)safety_now());
    return 0;
}

/* The roles swapped to the next server of the set, cleanly: writes paused on
 * the primary (CLIENT PAUSE WRITE: the workers' scripts wait there), every
 * replica caught up (its acknowledged offset at the primary's), the next
 * server promoted, the others (the old primary too) made its replicas, then
 * writes let go: what the paused clients sent meets a replica and is answered
 * READONLY, and the clients find the new primary by ROLE. Logged once the new
 * primary has its replicas back. */
static int replicated_swap(run *r)
{
    th_redis *old = rep_cur, *np = th_replset_next(&rs, rep_cur);
    if (!np)
        return -1;
    redisContext *ac = th_admin(old);
    if (!ac)
        return -1;
    int64_t a = safety_now();
    int rc = cmd_ok(ac, "CLIENT PAUSE 30000 WRITE");
    int up = 0;
    while (rc == 0 && up == 0 && safety_now() - a < 10000000000LL && !interrupted) {
        /* The replicas acknowledge once a second (REPLCONF ACK); GETACK asks
         * at once, but is itself a write: polled instead. */
        up = replicas_caught_up(ac);
        if (up == 0)
            msleep(20);
    }
    if (up != 1)
        rc = -1;
    if (rc == 0)
        rc = th_replset_promote(&rs, np);
    cmd_ok(ac, "CLIENT UNPAUSE");
    redisFree(ac);
    if (rc != 0)
        return -1;
    return switched(r, np, a);
}

/* A replica that lags: the next server is cut off from the primary (made a
 * replica of a port nobody listens on: still a replica, so the clients see
 * one primary), the workers go on for LAG_MS with grants it never receives,
 * then it is promoted as it is and the others (the old primary too) become
 * its replicas, dropping those grants: what a primary killed right after
 * grants it had not yet replicated leaves behind. The O record's start is
 * the promotion. */
#define LAG_MS 1500

static int replicated_lag(run *r)
{
    th_redis *np = th_replset_next(&rs, rep_cur);
    int dead = th_free_port();
    if (!np || dead <= 0)
        return -1;
    redisReply *y = th_cmd(np, "REPLICAOF 127.0.0.1 %d", dead);
    int rc = y && y->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (y)
        freeReplyObject(y);
    if (rc != 0)
        return -1;
    msleep(LAG_MS);
    int64_t a = safety_now();
    if (th_replset_promote(&rs, np) != 0)
        return -1;
    return switched(r, np, a);
}

/* A failover the sentinels make on their own: on a busy machine one may find
 * the primary it just promoted silent for down-after-milliseconds (1 s) and
 * promote another. Until the sentinels reach the replaced primary it stays
 * one, and the clients that have not heard of the switch go on writing there:
 * what they write is lost as in a planned failover (seen in a
 * safety_fair_failover_sentinel_kill run: live waiters' queue entries gone,
 * "fair order" violations 2 s after the planned failover). Logged as an O
 * record from the first poll that saw it begin (another server says it is a
 * primary, or a sentinel names another) to the first that saw every
 * sentinel name the new primary. Polled between the planned failovers. */
void deploy_watch(run *r, int kind)
{
    if (kind != DEPLOY_SENTINEL_KILL)
        return;
    if (known_port <= 0)
        known_port = th_sentinel_primary_port(&ss.s[0], ss.master);
    int64_t now = safety_now();
    int agreed = sentinels_agree(), begun = agreed != known_port;
    for (int i = 0; i <= TH_REPLICAS && !begun; i++) {
        th_redis *n = rs_server(i);
        if (n->port == known_port)
            continue;
        int primary = is_primary(n);
        if (!primary)
            former[i] = 0;   /* replaced, and told since */
        begun = primary && !former[i];
    }
    if (!begun) {
        unplanned_at = 0;   /* a poll between two sentinels' answers: nothing */
        return;
    }
    if (!unplanned_at)
        unplanned_at = now;
    if (agreed > 0 && agreed != known_port) {
        coord_log(r, "O %lld %lld", (long long)unplanned_at, (long long)safety_now());
        fprintf(stderr, "  note: the sentinels failed over on their own (to port %d)\n", agreed);
        primary_is(agreed);
        r->seen_unasked++;
    }
}

int deploy_sentinel_failover(void)
{
    redisReply *x = th_cmd(&ss.s[1], "SENTINEL FAILOVER %s", ss.master);
    int rc = x && x->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (x)
        freeReplyObject(x);
    return rc;
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
    case DEPLOY_REPLICATED:
        return replicated_swap(r);
    case DEPLOY_REPLICATED_LAG:
        return replicated_lag(r);
    default:
        return -1;
    }
}
