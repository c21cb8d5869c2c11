/* Harness: deployments. A primary with replicas, sentinels monitoring it, a
 * Redis Cluster; and the deployment of DLOCK_TEST_DEPLOY started in place of
 * a single server (th_redis_start). */
#include "harness_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *th_nodes_url(char *buf, size_t size, const char *kind, th_redis *const *nodes, int n,
                         const char *tail)
{
    int tls = nodes[0]->tls;
    size_t off = (size_t)snprintf(buf, size, "%s-%s://", tls ? "rediss" : "redis", kind);
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(buf + off, off < size ? size - off : 0, "%s127.0.0.1:%d",
                                i ? "," : "", th_client_port(nodes[i]));
    char query[1024];
    snprintf(buf + off, off < size ? size - off : 0, "%s%s",
             th__tls_query(tls, query, sizeof(query)), tail);
    return buf;
}

/* Deployments started in place of a single server (DLOCK_TEST_DEPLOY). */
typedef struct deployed {
    const th_redis *r;
    th_replset *rs;
    th_sentinels *ss;
    th_cluster *cl;
} deployed;

static deployed deployments[8];

const char *th_deploy_name(void)
{
    const char *d = getenv("DLOCK_TEST_DEPLOY");
    if (d && (strcmp(d, "sentinel") == 0 || strcmp(d, "cluster") == 0))
        return d;
    return "single";
}

static deployed *deployment_of(const th_redis *r)
{
    for (size_t i = 0; i < sizeof(deployments) / sizeof(deployments[0]); i++)
        if (deployments[i].r == r)
            return &deployments[i];
    return NULL;
}

int th_deployed(const th_redis *r) { return deployment_of(r) != NULL; }

int th__deploy_start(th_redis *r)
{
    deployed *d = deployment_of(NULL);
    if (!d)
        return -1;
    memset(d, 0, sizeof(*d));
    if (strcmp(th_deploy_name(), "sentinel") == 0) {
        d->rs = calloc(1, sizeof(*d->rs));
        d->ss = calloc(1, sizeof(*d->ss));
        if (!d->rs || !d->ss || th_replset_start(d->rs, NULL) != 0) {
            free(d->rs);
            free(d->ss);
            return -1;
        }
        if (th_sentinels_start(d->ss, d->rs, "dlocktest") != 0) {
            th_replset_destroy(d->rs);
            free(d->rs);
            free(d->ss);
            return -1;
        }
        r->port = d->rs->primary.port;
        r->pid = d->rs->primary.pid;
        snprintf(r->url, sizeof(r->url), "%s", d->ss->url);
    } else {
        d->cl = calloc(1, sizeof(*d->cl));
        if (!d->cl || th_cluster_start(d->cl) != 0) {
            free(d->cl);
            return -1;
        }
        r->port = d->cl->node[0].port;
        r->pid = d->cl->node[0].pid;
        snprintf(r->url, sizeof(r->url), "%s", d->cl->url);
    }
    d->r = r;
    /* Workers (tests/worker.c) reach a data node with it, not the URL's. */
    char port[16];
    snprintf(port, sizeof(port), "%d", r->port);
    setenv("DLOCK_TEST_ADMIN_PORT", port, 1);
    return 0;
}

int th__deploy_stop(const th_redis *r)
{
    deployed *d = deployment_of(r);
    if (!d)
        return 0;
    if (d->ss) {
        th_sentinels_destroy(d->ss);
        th_replset_destroy(d->rs);
    }
    if (d->cl)
        th_cluster_destroy(d->cl);
    free(d->ss);
    free(d->rs);
    free(d->cl);
    memset(d, 0, sizeof(*d));
    return 1;
}

/* The value of `field:` in an INFO-style text, into buf; 0 when found. */
static int info_field(const char *text, const char *field, char *buf, size_t size)
{
    size_t fl = strlen(field);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            size_t n = strcspn(p + fl + 1, "\r\n");
            if (n >= size)
                n = size - 1;
            memcpy(buf, p + fl + 1, n);
            buf[n] = '\0';
            return 0;
        }
    }
    return -1;
}

/* INFO-style field of `cmd`'s answer on r ("INFO replication", "CLUSTER INFO"). */
static int cmd_field(const th_redis *r, const char *cmd, const char *field, char *buf,
                     size_t size)
{
    redisReply *rep = th_cmd(r, cmd);
    int rc = -1;
    if (rep && rep->type == REDIS_REPLY_STRING)
        rc = info_field(rep->str, field, buf, size);
    if (rep)
        freeReplyObject(rep);
    return rc;
}

static int replica_up(const th_redis *r)
{
    char v[32];
    return cmd_field(r, "INFO replication", "master_link_status", v, sizeof(v)) == 0 &&
           strcmp(v, "up") == 0;
}

int th_replset_start(th_replset *rs, ...)
{
    memset(rs, 0, sizeof(*rs));
    th_redis proto;
    memset(&proto, 0, sizeof(proto));
    va_list ap;
    va_start(ap, rs);
    th__collect_extra(&proto, ap);
    va_end(ap);
    th_redis *all[1 + TH_REPLICAS] = {&rs->primary};
    for (int i = 0; i < TH_REPLICAS; i++)
        all[i + 1] = &rs->replica[i];
    for (int i = 0; i < 1 + TH_REPLICAS; i++) {
        memcpy(all[i]->extra, proto.extra, sizeof(proto.extra));
        all[i]->tls = th_tls_mode();   /* replication over TLS too */
        if (all[i]->tls)
            th__add_extra(all[i], "--tls-replication", "yes", NULL);
        if (th__make_dir(all[i]) != 0 || th__start_in_dir(all[i], NULL) != 0)
            goto fail;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", th_client_port(&rs->primary));
    for (int i = 0; i < TH_REPLICAS; i++) {
        redisReply *rep = th_cmd(&rs->replica[i], "REPLICAOF 127.0.0.1 %s", port);
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep)
            freeReplyObject(rep);
        if (!ok)
            goto fail;
    }
    for (int64_t until = th_now_ms() + 20000 * th_slack();;) {
        int up = 0;
        for (int i = 0; i < TH_REPLICAS; i++)
            up += replica_up(&rs->replica[i]);
        if (up == TH_REPLICAS)
            return 0;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(50);
    }
fail:
    fprintf(stderr, "harness: cannot start a primary with %d replicas\n", TH_REPLICAS);
    th_replset_destroy(rs);
    return -1;
}

static th_redis *rs_server(th_replset *rs, int i)
{
    return i == 0 ? &rs->primary : &rs->replica[i - 1];
}

th_redis *th_replset_next(th_replset *rs, const th_redis *cur)
{
    for (int i = 0; i <= TH_REPLICAS; i++)
        if (rs_server(rs, i) == cur)
            return rs_server(rs, (i + 1) % (TH_REPLICAS + 1));
    return NULL;
}

static int status_ok(redisReply *r)
{
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    return ok;
}

int th_replset_promote(th_replset *rs, th_redis *np)
{
    if (!status_ok(th_cmd(np, "REPLICAOF NO ONE")))
        return -1;
    for (int i = 0; i <= TH_REPLICAS; i++)
        if (rs_server(rs, i) != np &&
            !status_ok(th_cmd(rs_server(rs, i), "REPLICAOF 127.0.0.1 %d", th_client_port(np))))
            return -1;
    return 0;
}

int th_replset_await(const th_redis *np)
{
    char want[32];
    snprintf(want, sizeof(want), "connected_slaves:%d", TH_REPLICAS);
    for (int64_t until = th_now_ms() + 20000 * th_slack(); th_now_ms() < until;
         th_sleep_ms(20)) {
        redisReply *r = th_cmd(np, "INFO replication");
        int back = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
        if (r)
            freeReplyObject(r);
        if (back)
            return 0;
    }
    return -1;
}

void th_replset_destroy(th_replset *rs)
{
    for (int i = 0; i < TH_REPLICAS; i++)
        th_redis_destroy(&rs->replica[i]);
    th_redis_destroy(&rs->primary);
}

th_rs_fixture th_rs;

int th_rs_setup(void **state)
{
    (void)state;
    if (th_replset_start(&th_rs.set, NULL) != 0)
        return -1;
    th_rs.cur = &th_rs.set.primary;
    return 0;
}

int th_rs_teardown(void **state)
{
    (void)state;
    th_replset_destroy(&th_rs.set);
    th_rs.cur = NULL;
    return 0;
}

th_redis *th_rs_server(int i) { return rs_server(&th_rs.set, i); }

th_redis *th_rs_next(void) { return th_replset_next(&th_rs.set, th_rs.cur); }

/* Count of entries a SENTINEL subcommand lists for the master, or -1. */
static int sentinel_count(const th_redis *s, const char *sub, const char *master)
{
    redisReply *rep = th_cmd(s, "SENTINEL %s %s", sub, master);
    int n = rep && rep->type == REDIS_REPLY_ARRAY ? (int)rep->elements : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

int th_sentinel_primary_port(const th_redis *s, const char *master)
{
    redisReply *rep = th_cmd(s, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", master);
    int port = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(rep->element[1]->str);
    if (rep)
        freeReplyObject(rep);
    /* Over TLS the sentinels know the TLS ports: the plain one, as th_redis's. */
    char var[48];
    snprintf(var, sizeof(var), "DLOCK_TEST_PLAIN_%d", port);
    const char *plain = port > 0 ? getenv(var) : NULL;
    return plain ? atoi(plain) : port;
}

th_redis *th_sentinel_primary(th_replset *rs, const th_redis *s, const char *master)
{
    int port = th_sentinel_primary_port(s, master);
    if (port == rs->primary.port)
        return &rs->primary;
    for (int i = 0; i < TH_REPLICAS; i++)
        if (port == rs->replica[i].port)
            return &rs->replica[i];
    return NULL;
}

int th_sentinel_deploy_start(th_replset *rs, th_sentinels *ss, const char *master)
{
    if (th_replset_start(rs, NULL) != 0)
        return -1;
    if (th_sentinels_start(ss, rs, master) != 0) {
        th_replset_destroy(rs);
        return -1;
    }
    return 0;
}

void th_sentinel_deploy_destroy(th_replset *rs, th_sentinels *ss)
{
    th_sentinels_destroy(ss);
    th_replset_destroy(rs);
}

int th_sentinels_start(th_sentinels *ss, const th_replset *rs, const char *master)
{
    memset(ss, 0, sizeof(*ss));
    snprintf(ss->master, sizeof(ss->master), "%s", master);
    char conf[512];
    snprintf(conf, sizeof(conf),
             "bind 127.0.0.1\n"
             "sentinel monitor %s 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds %s 1000\n"
             "sentinel failover-timeout %s 5000\n"
             "sentinel parallel-syncs %s 1\n",
             master, th_client_port(&rs->primary), master, master, master);
    th_redis *nodes[TH_SENTINELS];
    for (int i = 0; i < TH_SENTINELS; i++) {
        ss->s[i].sentinel = 1;
        ss->s[i].tls = rs->primary.tls;   /* to clients, the data nodes and each other */
        if (ss->s[i].tls)
            th__add_extra(&ss->s[i], "--tls-replication", "yes", NULL);
        if (th__make_dir(&ss->s[i]) != 0 || th__start_in_dir(&ss->s[i], conf) != 0)
            goto fail;
        nodes[i] = &ss->s[i];
    }
    char tail[80];
    snprintf(tail, sizeof(tail), "#%s", master);
    th_nodes_url(ss->url, sizeof(ss->url), "sentinel", nodes, TH_SENTINELS, tail);
    /* Ready when each sentinel has found the replicas and the other sentinels
     * (by the hello channel, every 2 s). */
    for (int64_t until = th_now_ms() + 30000 * th_slack();;) {
        int ready = 0;
        for (int i = 0; i < TH_SENTINELS; i++)
            ready += sentinel_count(&ss->s[i], "REPLICAS", master) == TH_REPLICAS &&
                     sentinel_count(&ss->s[i], "SENTINELS", master) == TH_SENTINELS - 1;
        if (ready == TH_SENTINELS)
            return 0;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(100);
    }
fail:
    fprintf(stderr, "harness: cannot start %d sentinels for %s\n", TH_SENTINELS, master);
    th_sentinels_destroy(ss);
    return -1;
}

void th_sentinels_destroy(th_sentinels *ss)
{
    for (int i = 0; i < TH_SENTINELS; i++)
        th_redis_destroy(&ss->s[i]);
}

/* The slot ranges and their primaries' ports as node r sees them (CLUSTER
 * SLOTS), as text "start-end:port;..." sorted by start; 0 when answered. */
static int slots_signature(const th_redis *r, char *buf, size_t size)
{
    redisReply *rep = th_cmd(r, "CLUSTER SLOTS");
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    buf[0] = '\0';
    size_t off = 0;
    long long last = -1;
    /* Sorted output without sorting: pick the next range start each time. */
    for (size_t k = 0; k < rep->elements; k++) {
        redisReply *best = NULL;
        for (size_t i = 0; i < rep->elements; i++) {
            redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
                e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
                continue;
            long long st = e->element[0]->integer;
            if (st > last && (!best || st < best->element[0]->integer))
                best = e;
        }
        if (!best)
            break;
        last = best->element[0]->integer;
        off += (size_t)snprintf(buf + off, off < size ? size - off : 0, "%lld-%lld:%lld;",
                                best->element[0]->integer, best->element[1]->integer,
                                best->element[2]->element[1]->integer);
    }
    freeReplyObject(rep);
    return off < size ? 0 : -1;
}

int th_cluster_wait_ok(th_cluster *cl, int64_t timeout_ms)
{
    for (int64_t until = th_now_ms() + timeout_ms * th_slack();;) {
        char first[2048] = "", sig[2048], st[32];
        int ok = 1;
        for (int i = 0; i < TH_CLUSTER_NODES && ok; i++) {
            th_redis *n = &cl->node[i];
            if (n->pid <= 0)
                continue;
            ok = cmd_field(n, "CLUSTER INFO", "cluster_state", st, sizeof(st)) == 0 &&
                 strcmp(st, "ok") == 0 && slots_signature(n, sig, sizeof(sig)) == 0;
            if (ok && !first[0])
                snprintf(first, sizeof(first), "%s", sig);
            else if (ok)
                ok = strcmp(first, sig) == 0;
        }
        if (ok)
            return 0;
        if (th_now_ms() > until)
            return -1;
        th_sleep_ms(100);
    }
}

int th_cluster_node_start(th_redis *r)
{
    memset(r, 0, sizeof(*r));
    r->bus_port = -1;
    if (th__make_dir(r) != 0)
        return -1;
    return th__start_in_dir(r, NULL);
}

int th_cluster_start(th_cluster *cl)
{
    memset(cl, 0, sizeof(*cl));
    char prog[PATH_MAX];
    char addr[TH_CLUSTER_NODES][32];
    char *argv[16 + TH_CLUSTER_NODES];
    int argc = 0;
    if (!th__find_prog("redis-cli", prog, sizeof(prog)))
        return -1;
    argv[argc++] = prog;
    argv[argc++] = "--cluster";
    argv[argc++] = "create";
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        cl->node[i].bus_port = -1;
        /* Over TLS: the bus and replication too, and CLUSTER SLOTS names the
         * TLS ports to TLS clients (the plain ones to the harness's). */
        cl->node[i].tls = th_tls_mode();
        if (cl->node[i].tls)
            th__add_extra(&cl->node[i], "--tls-cluster", "yes", "--tls-replication", "yes", NULL);
        if (th__make_dir(&cl->node[i]) != 0 || th__start_in_dir(&cl->node[i], NULL) != 0)
            goto fail;
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", cl->node[i].port);
        argv[argc++] = addr[i];
    }
    argv[argc++] = "--cluster-replicas";
    argv[argc++] = "1";
    argv[argc++] = "--cluster-yes";
    argv[argc] = NULL;
    pid_t pid = th__spawn_argv(argv, -1);
    if (pid < 0 || th_wait(pid, 60000) != 0)
        goto fail;
    if (th_cluster_wait_ok(cl, 60000) != 0)
        goto fail;
    /* The replicas have their primaries' data (so a failover test starts from
     * a synchronised pair). */
    for (int64_t until = th_now_ms() + 30000 * th_slack();;) {
        int pending = 0;
        for (int i = 0; i < TH_CLUSTER_NODES; i++) {
            char role[16];
            if (cmd_field(&cl->node[i], "INFO replication", "role", role, sizeof(role)) != 0)
                pending++;
            else if (strcmp(role, "slave") == 0 && !replica_up(&cl->node[i]))
                pending++;
        }
        if (!pending)
            break;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(100);
    }
    th_redis *seeds[] = {&cl->node[0], &cl->node[1], &cl->node[2]};
    th_nodes_url(cl->url, sizeof(cl->url), "cluster", seeds, 3, "");
    return 0;
fail:
    fprintf(stderr, "harness: cannot create a cluster of %d nodes\n", TH_CLUSTER_NODES);
    th_cluster_destroy(cl);
    return -1;
}

void th_cluster_destroy(th_cluster *cl)
{
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        th_redis_destroy(&cl->node[i]);
}

th_redis *th_cluster_node_for(th_cluster *cl, const char *key)
{
    th_redis *any = NULL;
    for (int i = 0; i < TH_CLUSTER_NODES && !any; i++)
        if (cl->node[i].pid > 0)
            any = &cl->node[i];
    if (!any)
        return NULL;
    long long slot = th_int(any, "CLUSTER KEYSLOT %s", key);
    redisReply *rep = th_cmd(any, "CLUSTER SLOTS");
    long long port = -1;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && e->element[0]->integer <= slot &&
            slot <= e->element[1]->integer && e->element[2]->type == REDIS_REPLY_ARRAY &&
            e->element[2]->elements >= 2)
            port = e->element[2]->element[1]->integer;
    }
    if (rep)
        freeReplyObject(rep);
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        if (cl->node[i].pid > 0 && cl->node[i].port == port)
            return &cl->node[i];
    return NULL;
}

int th__deployment_nodes(const th_redis *r, const th_redis **out, int max)
{
    deployed *d = deployment_of(r);
    int n = 0;
    if (!d) {
        out[n++] = r;
    } else if (d->cl) {
        for (int i = 0; i < TH_CLUSTER_NODES && n < max; i++)
            if (d->cl->node[i].pid > 0)
                out[n++] = &d->cl->node[i];
    } else if (d->rs) {
        if (d->rs->primary.pid > 0)
            out[n++] = &d->rs->primary;
        for (int i = 0; i < TH_REPLICAS && n < max; i++)
            if (d->rs->replica[i].pid > 0)
                out[n++] = &d->rs->replica[i];
    }
    return n;
}

th_cluster *th__cluster_of(const th_redis *r)
{
    deployed *d = deployment_of(r);
    return d ? d->cl : NULL;
}
