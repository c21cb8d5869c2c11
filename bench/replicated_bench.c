/* dlock_bench replicated: a primary and a replica under redis-replicated://
 * (no Sentinel), the roles swapped with REPLICAOF, as an operator or a managed
 * service does it.
 *
 *   dlock_bench replicated --url redis-replicated://H:P,H:P [--workers 4] [--periods 3]
 *
 * --workers clients are opened (default scan interval, 1 s) and each takes and
 * gives back a lock. Then:
 *   - ROLE calls per node per scan interval per client: every node's
 *     cmdstat_role over --periods idle scan intervals (this program sends no
 *     ROLE itself), divided by the clients and the intervals;
 *   - the round trip (median of 200 dlock_client_ping);
 *   - the swap: once the replica's link is up, REPLICAOF NO ONE on it, then
 *     REPLICAOF to it on the old primary; from that answer, one client tries
 *     the lock (wait 0) every millisecond until a try succeeds (on the new
 *     primary: the old one refuses writes).
 * One JSON line: role_per_node_per_interval_per_client (the worst node),
 * rtt_ms, scan_ms, swap_to_acquire_ms, failed_tries, target_ms (one scan
 * interval + 2 round trips). The next run swaps the roles back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

#define MAX_NODES 8
#define SCAN_MS 1000

typedef struct rnode {
    char host[160];
    int port;
    redisContext *c;
} rnode;

/* The URL's host:port list (redis-replicated://h:p,h:p[/db]). */
static int parse_nodes(const char *url, rnode *n)
{
    const char *p = strstr(url, "://");
    if (!p)
        die("--url redis-replicated://H:P,H:P");
    p += 3;
    int k = 0;
    while (*p && *p != '/' && *p != '?' && k < MAX_NODES) {
        size_t len = strcspn(p, ",/?");
        char item[160];
        snprintf(item, sizeof(item), "%.*s", (int)len, p);
        char *colon = strrchr(item, ':');
        if (!colon)
            die("a node without a port");
        *colon = '\0';
        snprintf(n[k].host, sizeof(n[k].host), "%s", item);
        n[k].port = atoi(colon + 1);
        struct timeval tv = {10, 0};
        n[k].c = redisConnectWithTimeout(n[k].host, n[k].port, tv);
        if (!n[k].c || n[k].c->err)
            die("cannot reach a node");
        redisSetTimeout(n[k].c, tv);
        k++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (k < 2)
        die("replicated needs two nodes or more");
    return k;
}

static int is_master(redisContext *c)
{
    redisReply *r = redisCommand(c, "ROLE");
    int m = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
    if (r)
        freeReplyObject(r);
    return m;
}

static void ok_reply(redisContext *c, const char *fmt, const char *arg, int port)
{
    redisReply *r = arg ? redisCommand(c, fmt, arg, port) : redisCommand(c, fmt);
    if (!r || r->type != REDIS_REPLY_STATUS)
        die("REPLICAOF refused");
    freeReplyObject(r);
}

void replicated(void)
{
    rnode nodes[MAX_NODES];
    int nn = parse_nodes(O.url, nodes);
    long nc = O.workers > 0 ? O.workers : 1;
    if (nc > 64)
        nc = 64;
    dlock_client *cl[64];
    dlock_lock *l = NULL;
    for (long i = 0; i < nc; i++) {
        dlock_config *cfg = dlock_config_new();
        if (dlock_config_set_url(cfg, O.url) != DLOCK_OK ||
            dlock_config_set_scan_interval(cfg, SCAN_MS) != DLOCK_OK ||
            dlock_client_open(&cl[i], cfg) != DLOCK_OK)
            die("open");
        dlock_config_free(cfg);
        dlock_lock *x;
        if (dlock_lock_get(cl[i], "bench:replicated", &x) != DLOCK_OK ||
            dlock_lock_acquire(x, 5000) != DLOCK_OK || dlock_lock_release(x) != DLOCK_OK)
            die("a lock before the swap");
        if (i == 0)
            l = x;
        else
            dlock_lock_free(x);
    }

    /* ROLE per node per scan interval per client, over idle intervals. */
    long long before[MAX_NODES];
    for (int i = 0; i < nn; i++)
        before[i] = info_field(nodes[i].c, "commandstats", "cmdstat_role:calls=");
    int64_t t0 = now_ns();
    usleep((useconds_t)(O.periods * SCAN_MS * 1000));
    double intervals = (double)(now_ns() - t0) / 1e6 / SCAN_MS, worst = 0;
    for (int i = 0; i < nn; i++) {
        long long after = info_field(nodes[i].c, "commandstats", "cmdstat_role:calls=");
        double per = (double)(after - (before[i] < 0 ? 0 : before[i])) / (double)nc / intervals;
        if (per > worst)
            worst = per;
    }

    /* The round trip. */
    int64_t rtt[200];
    for (int i = 0; i < 200; i++) {
        int64_t a = now_ns();
        if (dlock_client_ping(cl[0]) != DLOCK_OK)
            die("ping");
        rtt[i] = now_ns() - a;
    }
    qsort(rtt, 200, sizeof(rtt[0]), cmp_i64);
    double rtt_ms = (double)rtt[100] / 1e6;

    /* The swap: the primary now, and the next node, once its link is up. */
    int p = -1;
    for (int i = 0; i < nn && p < 0; i++)
        if (is_master(nodes[i].c))
            p = i;
    if (p < 0)
        die("no primary");
    int np = (p + 1) % nn;
    for (int i = 0; i < 1000; i++) {
        redisReply *r = redisCommand(nodes[np].c, "INFO replication");
        int up = r && r->str && strstr(r->str, "master_link_status:up");
        if (r)
            freeReplyObject(r);
        if (up)
            break;
        usleep(10000);
    }
    ok_reply(nodes[np].c, "REPLICAOF NO ONE", NULL, 0);
    ok_reply(nodes[p].c, "REPLICAOF %s %d", nodes[np].host, nodes[np].port);
    for (int i = 0; i < nn; i++)
        if (i != p && i != np)
            ok_reply(nodes[i].c, "REPLICAOF %s %d", nodes[np].host, nodes[np].port);
    long failed;
    int64_t took = first_acquire_ns(l, now_ns(), &failed);
    printf("{\"peer\":\"dlock\",\"scenario\":\"replicated\",\"clients\":%ld,\"nodes\":%d,"
           "\"scan_ms\":%d,\"role_per_node_per_interval_per_client\":%.3f,\"rtt_ms\":%.3f,"
           "\"swap_to_acquire_ms\":%.1f,\"target_ms\":%.1f,\"failed_tries\":%ld}\n",
           nc, nn, SCAN_MS, worst, rtt_ms, (double)took / 1e6,
           SCAN_MS + 2 * rtt_ms, failed);
    dlock_lock_free(l);
    for (long i = 0; i < nc; i++)
        dlock_client_close(cl[i]);
    for (int i = 0; i < nn; i++)
        redisFree(nodes[i].c);
}
