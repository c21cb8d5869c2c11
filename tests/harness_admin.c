/* Harness: what tests ask Redis directly, beside the client under test:
 * commands on admin connections (following MOVED), call counts, subscribers,
 * publishing and subscribing where the deployment's publishers do, redis-cli. */
#include "harness_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

redisContext *th_admin(const th_redis *r)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static redisReply *vcmd(const th_redis *r, const char *fmt, va_list ap)
{
    redisContext *c = th_admin(r);
    if (!c)
        return NULL;
    va_list again;
    va_copy(again, ap);
    redisReply *rep = redisvCommand(c, fmt, ap);
    redisFree(c);
    /* A cluster node sends a key's command to the node that serves it. */
    for (int hops = 0; hops < 3 && rep && rep->type == REDIS_REPLY_ERROR &&
                       strncmp(rep->str, "MOVED ", 6) == 0; hops++) {
        const char *colon = strrchr(rep->str, ':');
        th_redis other = *r;
        other.port = colon ? atoi(colon + 1) : 0;
        freeReplyObject(rep);
        rep = NULL;
        if (other.port <= 0 || !(c = th_admin(&other)))
            break;
        va_list ap2;
        va_copy(ap2, again);
        rep = redisvCommand(c, fmt, ap2);
        va_end(ap2);
        redisFree(c);
    }
    va_end(again);
    return rep;
}

redisReply *th_cmd(const th_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = vcmd(r, fmt, ap);
    va_end(ap);
    return rep;
}

long long th_int(const th_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = vcmd(r, fmt, ap);
    va_end(ap);
    long long v = LLONG_MIN;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

long long th_server_ms(const th_redis *r)
{
    redisReply *rep = th_cmd(r, "TIME");
    long long ms = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
        ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    if (rep)
        freeReplyObject(rep);
    return ms;
}

long long th_marker_left(const th_redis *r, const char *key, char *owner, size_t size)
{
    if (th_int(r, "PTTL %s", key) != -1)
        return LLONG_MIN;
    redisReply *rep = th_cmd(r, "GET %s", key);
    long long left = LLONG_MIN;
    char *sp = rep && rep->type == REDIS_REPLY_STRING ? strchr(rep->str, ' ') : NULL;
    if (sp && sp > rep->str) {
        if (owner)
            snprintf(owner, size, "%s", sp + 1);
        left = atoll(rep->str) - th_server_ms(r);
    }
    if (rep)
        freeReplyObject(rep);
    return left;
}

static long long calls_on(const th_redis *r, const char *cmd);

static long long calls_on(const th_redis *r, const char *cmd)
{
    redisReply *rep = th_cmd(r, "INFO commandstats");
    if (!rep || rep->type != REDIS_REPLY_STRING) {
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    long long total = 0;
    size_t clen = cmd ? strlen(cmd) : 0;
    for (const char *p = rep->str; (p = strstr(p, "cmdstat_")); p++) {
        const char *name = p + 8;
        const char *calls = strstr(name, ":calls=");
        if (!calls)
            break;
        size_t nlen = (size_t)(calls - name);
        int is_info = nlen == 4 && strncmp(name, "info", 4) == 0;
        if (cmd ? nlen == clen && strncmp(name, cmd, clen) == 0 : !is_info)
            total += atoll(calls + 7);
    }
    freeReplyObject(rep);
    return total;
}

long long th_calls(const th_redis *r, const char *cmd)
{
    /* A cluster runs a command on the node serving its key: all of them. */
    th_cluster *cl = th__cluster_of(r);
    if (!cl)
        return calls_on(r, cmd);
    long long total = 0;
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        if (cl->node[i].pid <= 0)
            continue;
        /* primaries only: a replica also counts what it replicates */
        redisReply *role = th_cmd(&cl->node[i], "ROLE");
        int primary = role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                      role->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(role->element[0]->str, "master") == 0;
        if (role)
            freeReplyObject(role);
        if (!primary)
            continue;
        long long n = calls_on(&cl->node[i], cmd);
        if (n < 0)
            return -1;
        total += n;
    }
    return total;
}

long long th_calls_settled(const th_redis *r, int64_t max_ms)
{
    int64_t end = th_now_ms() + max_ms * th_slack();
    long long n = th_calls(r, NULL);
    for (;;) {
        th_sleep_ms(100);
        long long m = th_calls(r, NULL);
        if (m == n || th_now_ms() >= end)
            return m;
        n = m;
    }
}

int th_cli(const th_redis *r, ...)
{
    char prog[PATH_MAX], port[16];
    if (!th__find_prog("redis-cli", prog, sizeof(prog)))
        return -1;
    snprintf(port, sizeof(port), "%d", r->port);
    char *argv[32] = {prog, "-h", "127.0.0.1", "-p", port};
    int argc = 5;
    if (th__cluster_of(r))
        argv[argc++] = "-c";   /* follows MOVED to the key's node */
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    pid_t pid = th__spawn_argv(argv, -1);
    return th_wait(pid, 10000);
}

/* A PUBSUB count on r: NUMSUB/SHARDNUMSUB's count for channel `arg`, or how
 * many channels CHANNELS/SHARDCHANNELS list for pattern `arg`; -1 unasked. */
static long long pubsub_on(const th_redis *r, const char *sub, const char *arg)
{
    redisReply *rep = th_cmd(r, "PUBSUB %s %s", sub, arg);
    long long n = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && !strstr(sub, "NUMSUB"))
        n = (long long)rep->elements;
    else if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep)
        freeReplyObject(rep);
    return n;
}

/* The count as the deployment has it: on a single server `plain`; else the
 * sum of `plain` and `sharded` over every node. */
static long long pubsub_total(const th_redis *r, const char *plain, const char *sharded,
                              const char *arg)
{
    if (!th_deployed(r))
        return pubsub_on(r, plain, arg);
    const th_redis *nodes[TH_CLUSTER_NODES + TH_REPLICAS + 1];
    int n = th__deployment_nodes(r, nodes, (int)(sizeof(nodes) / sizeof(nodes[0])));
    long long total = 0;
    for (int i = 0; i < n; i++) {
        long long a = pubsub_on(nodes[i], plain, arg);
        long long b = pubsub_on(nodes[i], sharded, arg);
        if (a < 0 || b < 0)
            return -1;
        total += a + b;
    }
    return total;
}

long long th_numsub(const th_redis *r, const char *channel)
{
    return pubsub_total(r, "NUMSUB", "SHARDNUMSUB", channel);
}

long long th_channels(const th_redis *r, const char *pattern)
{
    return pubsub_total(r, "CHANNELS", "SHARDCHANNELS", pattern);
}

long long th_publish(const th_redis *r, const char *channel, const char *msg)
{
    /* SPUBLISH names its channel as a key: th_cmd follows MOVED to its node. */
    redisReply *rep = th_cmd(r, "%s %s %s", th__cluster_of(r) ? "SPUBLISH" : "PUBLISH",
                             channel, msg);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

redisContext *th_subscribe(const th_redis *r, const char *channel)
{
    const th_redis *at = r;
    th_cluster *cl = th__cluster_of(r);
    if (cl && !(at = th_cluster_node_for(cl, channel)))
        return NULL;
    redisContext *c = th_admin(at);
    if (!c)
        return NULL;
    redisReply *rep = redisCommand(c, "%s %s", cl ? "SSUBSCRIBE" : "SUBSCRIBE", channel);
    int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3;
    if (rep)
        freeReplyObject(rep);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}
