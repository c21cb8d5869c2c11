/* dlock_bench failover: a Sentinel failover, timed from the sentinels'
 * announcement of the switch to the first acquisition that succeeds on the
 * new primary.
 *
 *   dlock_bench failover --url redis-sentinel://H:P,...#MASTER --sentinel H:P
 *
 * The client is opened (and has taken and given back a lock) before the
 * failover. The bench subscribes to +switch-master on one sentinel, asks it
 * for a failover (SENTINEL FAILOVER, retried while a replica is not ready),
 * and once the switch is announced tries the lock (wait 0) every
 * millisecond until one try succeeds. One JSON line: switch_to_acquire_ms,
 * failed_tries (tries that came before the client followed the switch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

static redisContext *connect_to(const char *hostport)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof(host))
        die("--sentinel HOST:PORT");
    snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
    struct timeval tv = {30, 0};
    redisContext *c = redisConnectWithTimeout(host, atoi(colon + 1), tv);
    if (!c || c->err)
        die("cannot reach the sentinel");
    redisSetTimeout(c, tv);
    return c;
}

void failover(void)
{
    const char *hash = strrchr(O.url, '#');
    if (!hash || !O.sentinel)
        die("failover needs --url redis-sentinel://...#MASTER and --sentinel HOST:PORT");
    const char *master = hash + 1;
    dlock_client *c = open_client(0, 0);
    dlock_lock *l;
    if (dlock_lock_get(c, "bench:failover", &l) != DLOCK_OK ||
        dlock_lock_acquire(l, 5000) != DLOCK_OK || dlock_lock_release(l) != DLOCK_OK)
        die("a lock before the failover");
    redisContext *sub = connect_to(O.sentinel), *adm = connect_to(O.sentinel);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +switch-master");
    if (!r)
        die("subscribe");
    freeReplyObject(r);
    /* A replica may still be catching up after the previous run's switch. */
    int asked = 0;
    for (int i = 0; i < 300 && !asked; i++) {
        r = redisCommand(adm, "SENTINEL FAILOVER %s", master);
        asked = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (!asked)
            usleep(100000);
    }
    if (!asked)
        die("SENTINEL FAILOVER refused for 30 s");
    for (;;) {   /* the switch's announcement (30 s read timeout) */
        if (redisGetReply(sub, (void **)&r) != REDIS_OK || !r)
            die("no +switch-master within 30 s");
        int is_switch = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                        r->element[2]->type == REDIS_REPLY_STRING &&
                        strncmp(r->element[2]->str, master, strlen(master)) == 0;
        freeReplyObject(r);
        if (is_switch)
            break;
    }
    long failed;
    int64_t took = first_acquire_ns(l, now_ns(), &failed);
    printf("{\"peer\":\"dlock\",\"scenario\":\"failover\",\"switch_to_acquire_ms\":%.1f,"
           "\"failed_tries\":%ld}\n",
           (double)took / 1e6, failed);
    redisFree(sub);
    redisFree(adm);
    dlock_lock_free(l);
    dlock_client_close(c);
}
