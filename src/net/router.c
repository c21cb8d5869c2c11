/* Which node serves a key: one address (single.c), a sentinel-managed
 * primary (sentinel.c), a primary found by ROLE among listed nodes
 * (replicated.c), or a Redis Cluster (cluster.c), by the deployment the URL
 * named. Every request goes through here. */
#include <stdlib.h>

#include "net/cluster.h"
#include "net/replicated.h"
#include "net/sentinel.h"
#include "net/single.h"

struct dlock__router {
    dlock__deploy_kind kind;
    dlock__single *one;       /* single */
    dlock__cluster *cl;       /* cluster */
    dlock__sentinel *sen;     /* sentinel */
    dlock__replicated *rep;   /* replicated */
};

int dlock__router_new(dlock__router **out, dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__router *r = calloc(1, sizeof(*r));
    if (!r)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const dlock__deploy *d = &ctx->cfg->deploy;
    r->kind = d->kind;
    int rc;
    switch (d->kind) {
    case DLOCK__DEPLOY_CLUSTER:
        rc = dlock__cluster_new(&r->cl, ctx, d->seeds, d->nseeds, ep);
        break;
    case DLOCK__DEPLOY_SENTINEL:
        rc = dlock__sentinel_new(&r->sen, ctx, d->seeds, d->nseeds, d->master, d->sentinel_user,
                                 d->sentinel_pass, ep);
        break;
    case DLOCK__DEPLOY_REPLICATED:
        rc = dlock__replicated_new(&r->rep, ctx, d->seeds, d->nseeds, ep);
        break;
    default:
        rc = dlock__single_new(&r->one, ctx, ep);
        break;
    }
    if (rc != DLOCK_OK) {
        free(r);
        return rc;
    }
    *out = r;
    return DLOCK_OK;
}

void dlock__router_free(dlock__router *r)
{
    if (!r)
        return;
    dlock__single_free(r->one);
    dlock__cluster_free(r->cl);
    dlock__sentinel_free(r->sen);
    dlock__replicated_free(r->rep);
    free(r);
}

int dlock__router_check(dlock__router *r)
{
    /* A cluster proved itself by answering CLUSTER SLOTS. */
    if (r->cl)
        return DLOCK_OK;
    return dlock__node_check(dlock__router_node(r, NULL, 0));
}

dlock__node *dlock__router_node(dlock__router *r, const char *key, size_t len)
{
    if (r->cl)
        return dlock__cluster_node(r->cl, key, len);
    if (r->rep)
        return dlock__replicated_primary(r->rep);
    return r->sen ? dlock__sentinel_primary(r->sen) : dlock__single_node(r->one);
}

size_t dlock__router_primaries(dlock__router *r, dlock__node **out, size_t max)
{
    if (r->cl)
        return dlock__cluster_primaries(r->cl, out, max);
    if (max > 0)
        out[0] = dlock__router_node(r, NULL, 0);
    return 1;
}

int dlock__router_call(dlock__router *r, const dlock__req *req, dlock__res *res)
{
    if (r->sen)
        return dlock__sentinel_call(r->sen, req, res);
    if (r->rep)
        return dlock__replicated_call(r->rep, req, res);
    if (!r->cl)
        return dlock__single_call(r->one, req, res);
    if (req->script < 0 || !dlock__cluster_sharded(r->cl))
        return dlock__cluster_call(r->cl, req, res);
    dlock__req sharded = *req;
    sharded.script = dlock__router_script(r, req->script);
    return dlock__cluster_call(r->cl, &sharded, res);
}

int dlock__router_sharded(const dlock__router *r)
{
    return r->cl && dlock__cluster_sharded(r->cl);
}

int dlock__router_script(const dlock__router *r, int script)
{
    return script >= 0 && script < DLOCK__SCRIPT_COUNT && dlock__router_sharded(r)
               ? script + DLOCK__SCRIPT_COUNT
               : script;
}

int dlock__router_is_cluster(const dlock__router *r) { return r->cl != NULL; }

void dlock__router_stale(dlock__router *r)
{
    if (r->cl)
        dlock__cluster_stale(r->cl);
    if (r->sen)
        dlock__sentinel_stale(r->sen);
    if (r->rep)
        dlock__replicated_stale(r->rep);
}

int dlock__router_dynamic(const dlock__router *r) { return r->cl || r->sen || r->rep; }

uint64_t dlock__router_generation(dlock__router *r)
{
    if (r->cl)
        return dlock__cluster_generation(r->cl);
    if (r->rep)
        return dlock__replicated_generation(r->rep);
    return r->sen ? dlock__sentinel_generation(r->sen) : dlock__single_generation(r->one);
}

void dlock__router_demoted(dlock__router *r, const dlock__node *n)
{
    if (r->one)
        (void)dlock__single_demoted(r->one, n);
    else
        dlock__router_stale(r);
}
