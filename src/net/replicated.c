/* A primary and its replicas without Sentinel or Cluster
 * (redis-replicated://h1:p1,h2:p2[/db]; docs/internals/deployments.md): a
 * managed Redis that lists its nodes, or a static primary/replica set.
 *
 * The primary is the one node whose ROLE says "master". A scanner thread asks
 * every node every scan interval (config, default 1 s), and at once when a
 * caller or the io thread saw READONLY or lost the primary. Every node has a
 * pool for the router's life; the primary of the moment takes every request,
 * and the generation moves on each change, so the pub/sub connections, the
 * watchdog's renewals and the asynchronous calls follow it.
 *
 * No primary (every node a replica, or none answering) and two primaries at
 * once (a split, or a failover half done) are both "no primary": a request
 * then waits for one within its retry budget and otherwise fails, naming
 * the roles seen, and nothing is written. The io thread cannot wait:
 *   - two primaries: it is given the fence, a node whose address no
 *     connection can reach (a unix socket path under /dev/null, named for
 *     what it is), so that renewals, asynchronous calls and pub/sub
 *     subscriptions all refuse as the blocking calls do: a renewal is not
 *     sent (the hold is reported lost at its loss deadline unless one primary
 *     remains before it), an asynchronous call fails with DLOCK_ECONN once
 *     its budget is spent (or goes to the one primary once there is one).
 *     The generation moves when the split begins and when it ends, so every
 *     connection of the io thread follows.
 *   - no primary: it keeps the last primary (a renewal there is refused,
 *     READONLY, or finds no one; a hold is never extended elsewhere); a ROLE
 *     answered late on a busy machine does not move anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/backend.h"

#define SLICE_MS 20

typedef struct dlock__replicated dlock__replicated;

struct dlock__replicated {
    dlock__backend base;             /* first: the router's handle */
    dlock__netctx *ctx;
    dlock__node **nodes;             /* one per node listed, data credentials */
    size_t n;

    pthread_mutex_t mu;              /* primary, ok, roles */
    dlock__node *primary;            /* the last primary seen (never NULL after open) */
    int ok;                          /* 1 while exactly one node is the primary */
    int split;                       /* 1 while more than one node is a primary */
    dlock__node *fence;              /* what the io thread gets meanwhile: never reached */
    char roles[768];                 /* the last scan: "host:port master, ..." */
    _Atomic uint64_t scans;          /* scans done, for callers waiting for the next */
    _Atomic uint64_t scans_begun;    /* scans begun (the next one's number once done) */

    pthread_mutex_t scan_mu;         /* one scan at a time */
    dlock__refresher *bg;            /* the scanner thread (refresher.c) */
};

/* What ROLE answered: 1 master, 0 replica (or sentinel), -1 no answer. */
static int role_of(dlock__node *n, char *what, size_t size)
{
    const char *av[] = {"ROLE"};
    dlock__req req = {.script = -1, .argc = 1, .argv = av,
                      .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    dlock__res res;
    int rc = dlock__node_call(n, &req, &res);
    if (rc != DLOCK_OK) {
        snprintf(what, size, "no answer (%s)", dlock_strerror(rc));
        return -1;
    }
    redisReply *r = res.r;
    int role = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        role = strcmp(r->element[0]->str, "master") == 0;
        snprintf(what, size, "%s", r->element[0]->str);
    } else {
        snprintf(what, size, "an unexpected answer to ROLE");
    }
    freeReplyObject(r);
    return role;
}

/* Asks every node its role; sets the primary when exactly one is. */
static void scan(dlock__replicated *x)
{
    pthread_mutex_lock(&x->scan_mu);
    atomic_fetch_add(&x->scans_begun, 1);
    char roles[sizeof(x->roles)] = "";
    size_t off = 0;
    dlock__node *found = NULL;
    int masters = 0;
    for (size_t i = 0; i < x->n; i++) {
        char what[96];
        if (role_of(x->nodes[i], what, sizeof(what)) == 1) {
            masters++;
            if (!found)
                found = x->nodes[i];
        }
        if (off < sizeof(roles))
            off += (size_t)snprintf(roles + off, sizeof(roles) - off, "%s%s %s",
                                    off ? ", " : "", dlock__node_addr(x->nodes[i]), what);
    }
    pthread_mutex_lock(&x->mu);
    dlock__node *old = x->primary;
    int was_ok = x->ok, was_split = x->split;
    x->ok = masters == 1;
    x->split = masters > 1;
    if (masters == 1 && found != old)
        x->primary = found;
    if (x->primary != old || x->split != was_split)
        atomic_fetch_add(&x->base.generation, 1);   /* what the io thread gets changed */
    memcpy(x->roles, roles, sizeof(roles));
    pthread_mutex_unlock(&x->mu);
    atomic_fetch_add(&x->scans, 1);
    pthread_mutex_unlock(&x->scan_mu);
    if (masters == 1 && old && found != old) {
        dlock__log(x->ctx->cfg, DLOCK_LOG_WARN, "replicated: the primary moved from %s to %s",
                   dlock__node_addr(old), dlock__node_addr(found));
        dlock__node_promoted(found);
    }
    else if (masters > 1 && !was_split)
        dlock__log(x->ctx->cfg, DLOCK_LOG_WARN,
                   "replicated: more than one primary (%s): writes wait, renewals and "
                   "asynchronous calls are refused until one remains",
                   roles);
    else if (masters == 0 && was_ok)
        dlock__log(x->ctx->cfg, DLOCK_LOG_WARN, "replicated: no primary (%s): writes wait",
                   roles);
}

/* The status and message of "no single primary now". */
static int no_primary(dlock__replicated *x)
{
    pthread_mutex_lock(&x->mu);
    char roles[sizeof(x->roles)];
    memcpy(roles, x->roles, sizeof(roles));
    pthread_mutex_unlock(&x->mu);
    int two = 0;
    for (const char *p = roles; (p = strstr(p, " master")) != NULL; p++)
        two++;
    return dlock__fail(DLOCK_ECONN, "%s: %s",
                       two > 1 ? "more than one node is a primary; nothing is written until "
                                 "one remains"
                               : "no node is a primary",
                       roles);
}

/* A round of the scanner thread: every scan interval, and at once when a
 * caller or the io thread asked (rep_stale). */
static int64_t scanner(void *arg, int poked)
{
    dlock__replicated *x = arg;
    (void)poked;
    scan(x);
    return x->ctx->cfg->scan_interval_ms;
}

static void rep_stale(dlock__backend *b) { dlock__refresher_poke(((dlock__replicated *)b)->bg); }

static const dlock__backend_ops replicated_ops;
static void rep_free(dlock__backend *b);

int dlock__replicated_new(dlock__backend **out, dlock__netctx *ctx,
                          const dlock__endpoint *nodes, size_t n, const dlock__endpoint *data)
{
    if (n == 0)
        return dlock__fail(DLOCK_EINVAL, "a redis-replicated:// URL needs nodes");
    dlock__replicated *x = calloc(1, sizeof(*x));
    if (!x)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    x->base.ops = &replicated_ops;
    x->ctx = ctx;
    pthread_mutex_init(&x->mu, NULL);
    pthread_mutex_init(&x->scan_mu, NULL);
    int rc = DLOCK_OK;
    if (!(x->nodes = calloc(n, sizeof(*x->nodes))))
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc == DLOCK_OK) {
        dlock__endpoint ep = {.path = "/dev/null/dlock: more than one node is a primary"};
        rc = dlock__node_new(&x->fence, ctx, &ep);
    }
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        dlock__endpoint ep = *data;   /* borrowed; node_new copies */
        ep.host = nodes[i].host;
        ep.port = nodes[i].port;
        ep.path = NULL;
        if ((rc = dlock__node_new(&x->nodes[i], ctx, &ep)) == DLOCK_OK)
            x->n++;
    }
    /* A primary within the connect timeout, or a clear refusal. */
    for (int64_t until = dlock__now_ms() + ctx->cfg->connect_timeout_ms; rc == DLOCK_OK;) {
        scan(x);
        if (x->ok)
            break;
        if (dlock__now_ms() >= until) {
            rc = no_primary(x);
            break;
        }
        dlock__cancel_sleep(NULL, 100);
    }
    if (rc == DLOCK_OK)
        rc = dlock__refresher_start(&x->bg, x->ctx->cfg->scan_interval_ms, scanner, x,
                                    "replicated scanner");
    if (rc != DLOCK_OK) {
        rep_free(&x->base);
        return rc;
    }
    *out = &x->base;
    return DLOCK_OK;
}

static void rep_free(dlock__backend *b)
{
    dlock__replicated *x = (dlock__replicated *)b;
    dlock__refresher_stop(x->bg);
    for (size_t i = 0; i < x->n; i++)
        dlock__node_free(x->nodes[i]);
    dlock__node_free(x->fence);
    free(x->nodes);
    pthread_mutex_destroy(&x->mu);
    pthread_mutex_destroy(&x->scan_mu);
    free(x);
}

/* The primary, or NULL while there is not exactly one. */
static dlock__node *primary_if_one(dlock__replicated *x)
{
    pthread_mutex_lock(&x->mu);
    dlock__node *n = x->ok ? x->primary : NULL;
    pthread_mutex_unlock(&x->mu);
    return n;
}

static dlock__node *rep_node(dlock__backend *b, const char *key, size_t len)
{
    (void)key;
    (void)len;
    dlock__replicated *x = (dlock__replicated *)b;
    pthread_mutex_lock(&x->mu);
    dlock__node *n = x->split ? x->fence : x->primary;
    pthread_mutex_unlock(&x->mu);
    return n;
}


/* Waits until a scan that began after this call is done (or ms passed): a
 * READONLY or a lost primary asked for it. Scans run one at a time, so the
 * first to begin after the count of scans begun was read is done once the
 * count of scans done passes it; the one under way when it was read (which
 * may have asked a node before the change) does not count. DLOCK_OK or the
 * cancellation's status. */
static int await_scan(dlock__replicated *x, dlock_cancel *cancel, int64_t ms)
{
    uint64_t want = atomic_load(&x->scans_begun) + 1;
    rep_stale(&x->base);
    for (int64_t until = dlock__now_ms() + ms;
         atomic_load(&x->scans) < want && dlock__now_ms() < until;) {
        int rc = dlock__cancel_sleep(cancel, SLICE_MS);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

/* Each try goes to the primary of the moment, with call.c's retry budget:
 * a node that refuses writes (READONLY) or cannot be reached has the nodes
 * asked again, and a new primary gets the request at once. */
static int rep_call(dlock__backend *b, const dlock__req *req, dlock__res *res)
{
    dlock__replicated *x = (dlock__replicated *)b;
    const dlock_config *cfg = x->ctx->cfg;
    int failures = 0;
    for (;;) {
        dlock__node *n = primary_if_one(x);
        if (!n) {
            dlock__res_init(res);
            int rc = no_primary(x);
            if ((req->flags & DLOCK__CALL_NO_RETRY) || failures++ >= cfg->retry_attempts)
                return rc;
            if ((rc = await_scan(x, req->cancel, cfg->retry_delay_ms)) != DLOCK_OK)
                return rc;
            continue;
        }
        int rc = dlock__node_call(n, req, res);
        if (rc == DLOCK_OK || (rc != DLOCK_ECONN && res->err != DLOCK__RERR_READONLY))
            return rc;
        if ((req->flags & DLOCK__CALL_NO_RETRY) || failures++ >= cfg->retry_attempts)
            return rc;
        /* Not run (READONLY), or the node is gone: the roles are read again,
         * and a new primary gets the request at once. */
        int arc = await_scan(x, req->cancel, cfg->retry_delay_ms);
        if (arc != DLOCK_OK)
            return arc;
        if (primary_if_one(x) == n) {
            /* The same primary: the pause the retry delay asks for. */
            int prc = dlock__cancel_sleep(req->cancel, cfg->retry_delay_ms);
            if (prc != DLOCK_OK)
                return prc;
        }
    }
}

static const dlock__backend_ops replicated_ops = {
    .dynamic = 1,
    .free = rep_free,
    .node = rep_node,
    .call = rep_call,
    .stale = rep_stale,
};
