/* Which node serves a key: one address (single.c), a sentinel-managed
 * primary (sentinel.c), a primary found by ROLE among listed nodes
 * (replicated.c), or a Redis Cluster (cluster.c), by the deployment the URL
 * named (each one a dlock__backend, backend.h). Every request goes through
 * here. */
#include <stdlib.h>

#include "net/backend.h"

struct dlock__router {
    dlock__backend *b;        /* the deployment's */
};

int dlock__router_new(dlock__router **out, dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__router *r = calloc(1, sizeof(*r));
    if (!r)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const dlock__deploy *d = &ctx->cfg->deploy;
    int rc;
    switch (d->kind) {
    case DLOCK__DEPLOY_CLUSTER:
        rc = dlock__cluster_new(&r->b, ctx, d->seeds, d->nseeds, ep);
        break;
    case DLOCK__DEPLOY_SENTINEL:
        rc = dlock__sentinel_new(&r->b, ctx, d->seeds, d->nseeds, d->master, d->sentinel_user,
                                 d->sentinel_pass, ep);
        break;
    case DLOCK__DEPLOY_REPLICATED:
        rc = dlock__replicated_new(&r->b, ctx, d->seeds, d->nseeds, ep);
        break;
    default:
        rc = dlock__single_new(&r->b, ctx, ep);
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
    r->b->ops->free(r->b);
    free(r);
}

int dlock__router_check(dlock__router *r)
{
    /* A cluster proved itself by answering CLUSTER SLOTS. */
    if (r->b->ops->cluster)
        return DLOCK_OK;
    return dlock__node_check(dlock__router_node(r, NULL, 0));
}

dlock__node *dlock__router_node(dlock__router *r, const char *key, size_t len)
{
    return r->b->ops->node(r->b, key, len);
}

size_t dlock__router_primaries(dlock__router *r, dlock__node **out, size_t max)
{
    if (r->b->ops->primaries)
        return r->b->ops->primaries(r->b, out, max);
    if (max > 0)
        out[0] = dlock__router_node(r, NULL, 0);
    return 1;
}

int dlock__router_call(dlock__router *r, const dlock__req *req, dlock__res *res)
{
    int script = dlock__router_script(r, req->script);
    if (script == req->script)
        return r->b->ops->call(r->b, req, res);
    dlock__req sharded = *req;
    sharded.script = script;
    return r->b->ops->call(r->b, &sharded, res);
}

int dlock__router_sharded(const dlock__router *r)
{
    return r->b->ops->sharded && r->b->ops->sharded(r->b);
}

int dlock__router_script(const dlock__router *r, int script)
{
    return script >= 0 && script < DLOCK__SCRIPT_COUNT && dlock__router_sharded(r)
               ? script + DLOCK__SCRIPT_COUNT
               : script;
}

int dlock__router_is_cluster(const dlock__router *r) { return r->b->ops->cluster; }

void dlock__router_stale(dlock__router *r)
{
    if (r->b->ops->stale)
        r->b->ops->stale(r->b);
}

int dlock__router_dynamic(const dlock__router *r) { return r->b->ops->dynamic; }

uint64_t dlock__router_generation(dlock__router *r) { return atomic_load(&r->b->generation); }

void dlock__router_demoted(dlock__router *r, const dlock__node *n)
{
    if (r->b->ops->demoted)
        r->b->ops->demoted(r->b, n);
    else
        dlock__router_stale(r);
}
