/* The test and benchmark hooks (hooks.h): read-only looks at a client. */
#include <stdio.h>
#include <string.h>

#include "sync/hooks.h"
#include "sync/lock.h"

uint64_t dlock__hook_roundtrips(void) { return dlock__roundtrips; }
uint64_t dlock__hook_attempts(void) { return dlock__attempts; }
uint64_t dlock__hook_wakeups_wasted(void) { return dlock__wakeups_wasted; }

uint64_t dlock__hook_async_writes(dlock_client *c)
{
    return atomic_load_explicit(&c->stats.n[DLOCK__ST_ACALL_WRITES], memory_order_relaxed);
}

size_t dlock__hook_held(dlock_client *c) { return dlock__watchdog_count(c->wd); }

int dlock__hook_tracking(dlock_client *c) { return dlock__watchdog_tracking(c->wd); }

size_t dlock__hook_primaries(dlock_client *c) { return dlock__router_primaries(c->router, NULL, 0); }

size_t dlock__hook_lock_waiters(const dlock_lock *l)
{
    return dlock__pubsub_waiters(l->h.c->pubsub, l->h.channel, l->h.clen);
}

const char *dlock__hook_acquire_script(size_t *len)
{
    *len = dlock__scripts[DLOCK__SCRIPT_LOCK_ACQUIRE].len;
    return dlock__scripts[DLOCK__SCRIPT_LOCK_ACQUIRE].body;
}

int dlock__hook_server(const char *url, char *host, size_t hsize, int *port, char *path,
                       size_t psize)
{
    dlock__endpoint ep;
    dlock__deploy d;
    memset(&ep, 0, sizeof(ep));
    memset(&d, 0, sizeof(d));
    int rc = dlock__parse_deploy_url(url, &ep, &d, NULL);
    if (rc != DLOCK_OK)
        return rc;
    const dlock__endpoint *first = d.nseeds > 0 && d.kind == DLOCK__DEPLOY_CLUSTER ? &d.seeds[0]
                                                                                   : &ep;
    snprintf(host, hsize, "%s", first->host ? first->host : "");
    snprintf(path, psize, "%s", first->path ? first->path : "");
    *port = first->port;
    dlock__endpoint_clear(&ep);
    dlock__deploy_clear(&d);
    return DLOCK_OK;
}
